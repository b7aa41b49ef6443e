// SwiGLU: out = silu(gate) · up over gate_up (N, 2F). fp32 and bf16 (the training path) alike: a
// 2-D grid of rows × 16-byte vectors of the row's columns (4 floats, 8 bf16).
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/launch.h"
#include "backends/cuda/op_math.h"
#include "backends/cuda/reduce.cuh"
#include "backends/cuda/store.cuh"

namespace ft::cuda {

namespace {

// (x) V-wide groups of a row's F columns, a 32-bit in-row index; (y) rows, grid-stride. T is float
// (V = 4: float4) or bf16 (uint16_t, V = 8: 8 bf16 in 16 bytes); V = 1 where F is not a multiple
// of V or a pointer is not 16-byte aligned.
template <int V, typename T>
__global__ void swiglu_forward_kernel(T* out, const T* gu, int64_t N, int32_t F) {
  const int32_t f =
      (static_cast<int32_t>(blockIdx.x) * static_cast<int32_t>(blockDim.x) + static_cast<int32_t>(threadIdx.x)) * V;
  if (f >= F) return;
  for (int64_t n = blockIdx.y; n < N; n += gridDim.y) {
    float g[V], u[V], o[V];
    load_vec<V>(gu + n * 2 * F + f, g);
    load_vec<V>(gu + n * 2 * F + F + f, u);
    for (int i = 0; i < V; ++i) o[i] = math::swiglu(g[i], u[i]);
    store_vec<V>(out + n * F + f, o);
  }
}

template <int V, typename T>
__global__ void swiglu_backward_kernel(T* dgu, const T* dout, const T* gu, int64_t N, int32_t F) {
  const int32_t f =
      (static_cast<int32_t>(blockIdx.x) * static_cast<int32_t>(blockDim.x) + static_cast<int32_t>(threadIdx.x)) * V;
  if (f >= F) return;
  for (int64_t n = blockIdx.y; n < N; n += gridDim.y) {
    float g[V], u[V], dy[V], dg[V], du[V];
    load_vec<V>(gu + n * 2 * F + f, g);
    load_vec<V>(gu + n * 2 * F + F + f, u);
    load_vec<V>(dout + n * F + f, dy);
    for (int i = 0; i < V; ++i) math::swiglu_grad(g[i], u[i], dy[i], &dg[i], &du[i]);
    store_vec<V>(dgu + n * 2 * F + f, dg);
    store_vec<V>(dgu + n * 2 * F + F + f, du);
  }
}

// 16 bytes of T.
template <typename T>
constexpr int kWide = 16 / static_cast<int>(sizeof(T));

template <typename T>
void forward(CudaContext& ctx, const char* op, T* out, const T* gu, int64_t N, int64_t F) {
  require(N >= 0 && F >= 0 && F <= kMaxRowElems, op, "bad sizes", {{"N", N}, {"F", F}});
  if (N * F == 0) return;
  constexpr int W = kWide<T>;
  const bool wide = vector_width(W, F, out, gu) == W;
  const LaunchShape l = row_vector_launch(N, wide ? F / W : F);
  FT_LAUNCH((wide ? swiglu_forward_kernel<W, T> : swiglu_forward_kernel<1, T>), to_dim3(l.grid), to_dim3(l.block), 0,
            ctx.stream())
  (out, gu, N, static_cast<int32_t>(F));
  FT_CUDA_CHECK_LAUNCH(ctx, op, {"N", N}, {"F", F});
}

template <typename T>
void backward(CudaContext& ctx, const char* op, T* dgu, const T* dout, const T* gu, int64_t N, int64_t F) {
  require(N >= 0 && F >= 0 && F <= kMaxRowElems, op, "bad sizes", {{"N", N}, {"F", F}});
  if (N * F == 0) return;
  constexpr int W = kWide<T>;
  const bool wide = vector_width(W, F, dgu, dout, gu) == W;
  const LaunchShape l = row_vector_launch(N, wide ? F / W : F);
  FT_LAUNCH((wide ? swiglu_backward_kernel<W, T> : swiglu_backward_kernel<1, T>), to_dim3(l.grid), to_dim3(l.block), 0,
            ctx.stream())
  (dgu, dout, gu, N, static_cast<int32_t>(F));
  FT_CUDA_CHECK_LAUNCH(ctx, op, {"N", N}, {"F", F});
}

}  // namespace

void swiglu_forward(CudaContext& ctx, float* out, const float* gate_up, int64_t N, int64_t F) {
  forward(ctx, "swiglu_forward", out, gate_up, N, F);
}
void swiglu_backward(CudaContext& ctx, float* dgate_up, const float* dout, const float* gate_up, int64_t N, int64_t F) {
  backward(ctx, "swiglu_backward", dgate_up, dout, gate_up, N, F);
}

void swiglu_forward_bf16(CudaContext& ctx, uint16_t* out, const uint16_t* gate_up, int64_t N, int64_t F) {
  forward(ctx, "swiglu_forward_bf16", out, gate_up, N, F);
}

void swiglu_backward_bf16(CudaContext& ctx, uint16_t* dgate_up, const uint16_t* dout, const uint16_t* gate_up,
                          int64_t N, int64_t F) {
  backward(ctx, "swiglu_backward_bf16", dgate_up, dout, gate_up, N, F);
}

}  // namespace ft::cuda

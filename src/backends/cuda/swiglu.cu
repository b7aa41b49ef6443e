// SwiGLU: out = silu(gate) · up over gate_up (N, 2F). fp32: one thread per output element,
// grid-stride. bf16 (the training path): a 2-D grid of rows × 16-byte vectors of 8 columns.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/launch.h"
#include "backends/cuda/op_math.h"
#include "backends/cuda/reduce.cuh"
#include "backends/cuda/store.cuh"

namespace ft::cuda {

namespace {

template <typename Out>
__global__ void swiglu_forward_kernel(Out* out, const float* gu, int64_t N, int64_t F) {
  const int64_t n_all = N * F;
  for (int64_t i = first_index(blockIdx.x, blockDim.x, threadIdx.x); i < n_all;
       i += grid_stride(gridDim.x, blockDim.x)) {
    const int64_t n = i / F, f = i % F;
    store(out + i, math::swiglu(gu[n * 2 * F + f], gu[n * 2 * F + F + f]));
  }
}

template <typename Out>
__global__ void swiglu_backward_kernel(Out* dgu, const float* dout, const float* gu, int64_t N, int64_t F) {
  const int64_t n_all = N * F;
  for (int64_t i = first_index(blockIdx.x, blockDim.x, threadIdx.x); i < n_all;
       i += grid_stride(gridDim.x, blockDim.x)) {
    const int64_t n = i / F, f = i % F;
    float dg, du;
    math::swiglu_grad(gu[n * 2 * F + f], gu[n * 2 * F + F + f], dout[i], &dg, &du);
    store(dgu + n * 2 * F + f, dg);
    store(dgu + n * 2 * F + F + f, du);
  }
}

// The bf16 forms: (x) V-wide groups of a row's F columns, a 32-bit in-row index; (y) rows. V = 8:
// 16-byte loads and stores of 8 bf16 (F a multiple of 8, rows aligned), else 1.
template <int V>
__global__ void swiglu_forward_bf16_kernel(uint16_t* out, const uint16_t* gu, int64_t N, int32_t F) {
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

template <int V>
__global__ void swiglu_backward_bf16_kernel(uint16_t* dgu, const uint16_t* dout, const uint16_t* gu, int64_t N,
                                            int32_t F) {
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

template <typename Out>
void forward(CudaContext& ctx, Out* out, const float* gu, int64_t N, int64_t F) {
  require(N >= 0 && F >= 0, "swiglu_forward", "negative size", {{"N", N}, {"F", F}});
  if (N * F == 0) return;
  const LaunchShape l = elementwise_launch(N * F);
  FT_LAUNCH(swiglu_forward_kernel, to_dim3(l.grid), to_dim3(l.block), 0, ctx.stream())(out, gu, N, F);
  FT_CUDA_CHECK_LAUNCH(ctx, "swiglu_forward", {"N", N}, {"F", F});
}

template <typename Out>
void backward(CudaContext& ctx, Out* dgu, const float* dout, const float* gu, int64_t N, int64_t F) {
  require(N >= 0 && F >= 0, "swiglu_backward", "negative size", {{"N", N}, {"F", F}});
  if (N * F == 0) return;
  const LaunchShape l = elementwise_launch(N * F);
  FT_LAUNCH(swiglu_backward_kernel, to_dim3(l.grid), to_dim3(l.block), 0, ctx.stream())(dgu, dout, gu, N, F);
  FT_CUDA_CHECK_LAUNCH(ctx, "swiglu_backward", {"N", N}, {"F", F});
}

}  // namespace

void swiglu_forward(CudaContext& ctx, float* out, const float* gate_up, int64_t N, int64_t F) {
  forward(ctx, out, gate_up, N, F);
}
void swiglu_backward(CudaContext& ctx, float* dgate_up, const float* dout, const float* gate_up, int64_t N, int64_t F) {
  backward(ctx, dgate_up, dout, gate_up, N, F);
}

void swiglu_forward_bf16(CudaContext& ctx, uint16_t* out, const uint16_t* gate_up, int64_t N, int64_t F) {
  const char* op = "swiglu_forward_bf16";
  require(N >= 0 && F >= 0 && F <= kMaxRowElems, op, "bad sizes", {{"N", N}, {"F", F}});
  if (N * F == 0) return;
  const auto F32 = static_cast<int32_t>(F);
  if (vector_width(8, F, out, gate_up) == 8) {
    const LaunchShape l = row_vector_launch(N, F / 8);
    FT_LAUNCH(swiglu_forward_bf16_kernel<8>, to_dim3(l.grid), to_dim3(l.block), 0, ctx.stream())(out, gate_up, N, F32);
  } else {
    const LaunchShape l = row_vector_launch(N, F);
    FT_LAUNCH(swiglu_forward_bf16_kernel<1>, to_dim3(l.grid), to_dim3(l.block), 0, ctx.stream())(out, gate_up, N, F32);
  }
  FT_CUDA_CHECK_LAUNCH(ctx, op, {"N", N}, {"F", F});
}

void swiglu_backward_bf16(CudaContext& ctx, uint16_t* dgate_up, const uint16_t* dout, const uint16_t* gate_up,
                          int64_t N, int64_t F) {
  const char* op = "swiglu_backward_bf16";
  require(N >= 0 && F >= 0 && F <= kMaxRowElems, op, "bad sizes", {{"N", N}, {"F", F}});
  if (N * F == 0) return;
  const auto F32 = static_cast<int32_t>(F);
  if (vector_width(8, F, dgate_up, dout, gate_up) == 8) {
    const LaunchShape l = row_vector_launch(N, F / 8);
    FT_LAUNCH(swiglu_backward_bf16_kernel<8>, to_dim3(l.grid), to_dim3(l.block), 0, ctx.stream())
    (dgate_up, dout, gate_up, N, F32);
  } else {
    const LaunchShape l = row_vector_launch(N, F);
    FT_LAUNCH(swiglu_backward_bf16_kernel<1>, to_dim3(l.grid), to_dim3(l.block), 0, ctx.stream())
    (dgate_up, dout, gate_up, N, F32);
  }
  FT_CUDA_CHECK_LAUNCH(ctx, op, {"N", N}, {"F", F});
}

}  // namespace ft::cuda

// Elementwise ops over flat arrays: residual adds, scaling, conversions to and from bf16/fp16,
// and the sum of squares (gradient norm) in double, in a fixed order.
#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/launch.h"
#include "backends/cuda/op_math.h"
#include "backends/cuda/reduce.cuh"
#include "backends/cuda/store.cuh"

namespace ft::cuda {

namespace {

#define FT_GRID_STRIDE(i, n) \
  for (int64_t i = first_index(blockIdx.x, blockDim.x, threadIdx.x); i < (n); i += grid_stride(gridDim.x, blockDim.x))

// The flat ops of the training step in V-wide groups (16-byte accesses when the pointers allow,
// launch_vectorised), then the n % V tail one element at a time.
template <int V>
__global__ void add_kernel(float* y, const float* x, int64_t n) {
  FT_GRID_STRIDE(g, n / V) {
    float a[V], b[V];
    load_vec<V>(y + g * V, a);
    load_vec<V>(x + g * V, b);
    for (int k = 0; k < V; ++k) a[k] += b[k];
    store_vec<V>(y + g * V, a);
  }
  FT_GRID_STRIDE(i, n % V) y[n / V * V + i] += x[n / V * V + i];
}

// bf16 and fp16, the two 16-bit formats (bit patterns in uint16_t): the kernels below are written
// once for both.
struct Bf16 {
  static __device__ __forceinline__ uint16_t narrow(float x) { return math::to_bf16(x); }
  static __device__ __forceinline__ float widen(uint16_t h) { return math::from_bf16(h); }
};
struct F16 {
  static __device__ __forceinline__ uint16_t narrow(float x) { return math::to_f16(x); }
  static __device__ __forceinline__ float widen(uint16_t h) { return math::from_f16(h); }
};

// V (1 or 8) 16-bit values: 8 in one 16-byte access (two to a 32-bit word, the first in the low
// half: little-endian memory order).
template <int V>
__device__ __forceinline__ void load_halves(const uint16_t* p, uint16_t (&h)[V]) {
  static_assert(V == 1 || V == 8, "1 or 8 halves");
  if constexpr (V == 1) {
    h[0] = *p;
  } else {
    FT_VECTOR_ACCESS(p, 16);
    const uint4 q = *reinterpret_cast<const uint4*>(p);
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
    for (int k = 0; k < 4; ++k) {
      h[2 * k] = static_cast<uint16_t>(w[k] & 0xffffu);
      h[2 * k + 1] = static_cast<uint16_t>(w[k] >> 16);
    }
  }
}

template <int V>
__device__ __forceinline__ void store_halves(uint16_t* p, const uint16_t (&h)[V]) {
  static_assert(V == 1 || V == 8, "1 or 8 halves");
  if constexpr (V == 1) {
    *p = h[0];
  } else {
    FT_VECTOR_ACCESS(p, 16);
    uint32_t w[4];
    for (int k = 0; k < 4; ++k) w[k] = static_cast<uint32_t>(h[2 * k]) | (static_cast<uint32_t>(h[2 * k + 1]) << 16);
    *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// fp32 → 16-bit: V = 8 reads two float4 and writes one 16-byte vector.
template <typename Fmt, int V>
__global__ void narrow_kernel(uint16_t* y, const float* x, int64_t n) {
  FT_GRID_STRIDE(g, n / V) {
    float a[V];
    uint16_t h[V];
    load_vec<V>(x + g * V, a);
    for (int k = 0; k < V; ++k) h[k] = Fmt::narrow(a[k]);
    store_halves<V>(y + g * V, h);
  }
  FT_GRID_STRIDE(i, n % V) y[n / V * V + i] = Fmt::narrow(x[n / V * V + i]);
}

// 16-bit → fp32 (exact): V = 8 reads one 16-byte vector and writes two float4.
template <typename Fmt, int V>
__global__ void widen_kernel(float* y, const uint16_t* x, int64_t n) {
  FT_GRID_STRIDE(g, n / V) {
    uint16_t h[V];
    float a[V];
    load_halves<V>(x + g * V, h);
    for (int k = 0; k < V; ++k) a[k] = Fmt::widen(h[k]);
    store_vec<V>(y + g * V, a);
  }
  FT_GRID_STRIDE(i, n % V) y[n / V * V + i] = Fmt::widen(x[n / V * V + i]);
}

// Pass 1: kSumSquaresBlocks partial sums (each thread its grid-stride elements, then a tree).
__global__ void sum_squares_partial_kernel(double* partial, const float* x, int64_t n) {
  FT_SHARED(double, red, kRowThreads / kWarp);
  double s = 0;
  FT_GRID_STRIDE(i, n) s += static_cast<double>(x[i]) * x[i];
  s = block_sum(s, red);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// Pass 2: one block adds the partials, then adds the call's sum to *sum.
__global__ void sum_squares_final_kernel(double* sum, const double* partial, int64_t count) {
  FT_SHARED(double, red, kRowThreads / kWarp);
  double s = 0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) s += partial[i];
  s = block_sum(s, red);
  if (threadIdx.x == 0) *sum += s;
}

// One thread: *sum += x[0], += x[1], ... in order (the CPU op's host loop).
__global__ void sum_in_order_kernel(double* sum, const float* x, int64_t n) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  double s = *sum;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]);
  *sum = s;
}

// error = grad − approx / ranks, then grad = approx (V-wide groups, then the tail).
template <int V>
__global__ void error_feedback_kernel(float* error, float* grad, const float* approx, float ranks, int64_t n) {
  FT_GRID_STRIDE(g, n / V) {
    float gr[V], ap[V], e[V];
    load_vec<V>(grad + g * V, gr);
    load_vec<V>(approx + g * V, ap);
    for (int k = 0; k < V; ++k) e[k] = gr[k] - ap[k] / ranks;
    store_vec<V>(error + g * V, e);
    store_vec<V>(grad + g * V, ap);
  }
  FT_GRID_STRIDE(i, n % V) {
    const int64_t j = n / V * V + i;
    error[j] = grad[j] - approx[j] / ranks;
    grad[j] = approx[j];
  }
}

// kernel<V> over n elements: V = `Wide` when every pointer is 16-byte aligned (`aligned`), else 1.
template <int Wide, typename... Args>
void launch_vectorised(CudaContext& ctx, const char* op, int64_t n, bool aligned, void (*wide)(Args..., int64_t),
                       void (*narrow)(Args..., int64_t), Args... args) {
  require(n >= 0, op, "negative size", {{"n", n}});
  if (n == 0) return;
  const LaunchShape l = elementwise_launch(aligned ? std::max<int64_t>(1, n / Wide) : n);
  FT_LAUNCH((aligned ? wide : narrow), to_dim3(l.grid), to_dim3(l.block), 0, ctx.stream())(args..., n);
  FT_CUDA_CHECK_LAUNCH(ctx, op, {"n", n});
}

template <typename Fmt>
void narrow(CudaContext& ctx, const char* op, uint16_t* y, const float* x, int64_t n) {
  launch_vectorised<8, uint16_t*, const float*>(ctx, op, n, aligned16(y, x), narrow_kernel<Fmt, 8>,
                                                narrow_kernel<Fmt, 1>, y, x);
}

template <typename Fmt>
void widen(CudaContext& ctx, const char* op, float* y, const uint16_t* x, int64_t n) {
#if defined(FT_VGPU_FAULTS)  // tests/vgpu: a vector access off a 16-byte boundary must be caught
  const bool aligned = aligned16(y, x) || ::vgpu::fault_enabled("widen_ignores_alignment");
#else
  const bool aligned = aligned16(y, x);
#endif
  launch_vectorised<8, float*, const uint16_t*>(ctx, op, n, aligned, widen_kernel<Fmt, 8>, widen_kernel<Fmt, 1>, y, x);
}

}  // namespace

void add_inplace(CudaContext& ctx, float* y, const float* x, int64_t n) {
  launch_vectorised<4, float*, const float*>(ctx, "add_inplace", n, aligned16(y, x), add_kernel<4>, add_kernel<1>, y,
                                             x);
}

void to_bf16(CudaContext& ctx, uint16_t* y, const float* x, int64_t n) {
  narrow<Bf16>(ctx, "to_bf16", y, x, n);
}

void to_f16(CudaContext& ctx, uint16_t* y, const float* x, int64_t n) {
  narrow<F16>(ctx, "to_f16", y, x, n);
}

void widen_bf16(CudaContext& ctx, float* y, const uint16_t* x, int64_t n) {
  widen<Bf16>(ctx, "widen_bf16", y, x, n);
}

void from_bf16(CudaContext& ctx, float* y, const uint16_t* x, int64_t n) {
  widen<Bf16>(ctx, "from_bf16", y, x, n);
}

void widen_f16(CudaContext& ctx, float* y, const uint16_t* x, int64_t n) {
  widen<F16>(ctx, "widen_f16", y, x, n);
}

void to_fp16(CudaContext& ctx, uint16_t* y, const float* x, int64_t n) {
  narrow<F16>(ctx, "to_fp16", y, x, n);
}

void from_fp16(CudaContext& ctx, float* y, const uint16_t* x, int64_t n) {
  widen<F16>(ctx, "from_fp16", y, x, n);
}

void sum_squares(CudaContext& ctx, double* sum, const float* x, int64_t n) {
  require(n >= 0, "sum_squares", "negative size", {{"n", n}});
  if (n == 0) return;
  auto* partial = static_cast<double*>(ctx.scratch(kSumSquaresBlocks * sizeof(double), "sum_squares"));
  const LaunchShape l = sum_squares_launch(n);
  FT_LAUNCH(sum_squares_partial_kernel, to_dim3(l.grid), to_dim3(l.block), 0, ctx.stream())(partial, x, n);
  FT_CUDA_CHECK_LAUNCH(ctx, "sum_squares", {"n", n});
  FT_LAUNCH(sum_squares_final_kernel, 1, kRowThreads, 0, ctx.stream())(sum, partial, l.grid.x);
  FT_CUDA_CHECK_LAUNCH(ctx, "sum_squares", {"n", n});
}

void sum_in_order(CudaContext& ctx, double* sum, const float* x, int64_t n) {
  require(n >= 0, "sum_in_order", "negative size", {{"n", n}});
  if (n == 0) return;
  FT_LAUNCH(sum_in_order_kernel, 1, 1, 0, ctx.stream())(sum, x, n);
  FT_CUDA_CHECK_LAUNCH(ctx, "sum_in_order", {"n", n});
}

void powersgd_error_feedback(CudaContext& ctx, float* error, float* grad, const float* approx, float ranks, int64_t n) {
  launch_vectorised<4, float*, float*, const float*, float>(ctx, "powersgd_error_feedback", n,
                                                            aligned16(error, grad, approx), error_feedback_kernel<4>,
                                                            error_feedback_kernel<1>, error, grad, approx, ranks);
}

}  // namespace ft::cuda

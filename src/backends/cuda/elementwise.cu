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

template <int V>
__global__ void to_bf16_kernel(uint16_t* y, const float* x, int64_t n) {
  FT_GRID_STRIDE(g, n / V) {
    float a[V];
    load_vec<V>(x + g * V, a);
    store_vec<V>(y + g * V, a);
  }
  FT_GRID_STRIDE(i, n % V) y[n / V * V + i] = math::to_bf16(x[n / V * V + i]);
}

__global__ void to_f16_kernel(uint16_t* y, const float* x, int64_t n) {
  FT_GRID_STRIDE(i, n) y[i] = math::to_f16(x[i]);
}

__global__ void bf16_to_f32_kernel(float* y, const uint16_t* x, int64_t n) {
  FT_GRID_STRIDE(i, n) y[i] = math::from_bf16(x[i]);
}

__global__ void f16_to_f32_kernel(float* y, const uint16_t* x, int64_t n) {
  FT_GRID_STRIDE(i, n) y[i] = math::from_f16(x[i]);
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

// error = grad − approx / ranks, then grad = approx.
__global__ void error_feedback_kernel(float* error, float* grad, const float* approx, float ranks, int64_t n) {
  FT_GRID_STRIDE(i, n) {
    error[i] = grad[i] - approx[i] / ranks;
    grad[i] = approx[i];
  }
}

// kernel<V> over n elements: V = `wide` when every pointer is 16-byte aligned, else 1.
template <int Wide, typename... Args>
void launch_vectorised(CudaContext& ctx, const char* op, int64_t n, void (*wide)(Args..., int64_t),
                       void (*narrow)(Args..., int64_t), Args... args) {
  require(n >= 0, op, "negative size", {{"n", n}});
  if (n == 0) return;
  const bool vec = aligned16(args...);
  const LaunchShape l = elementwise_launch(vec ? std::max<int64_t>(1, n / Wide) : n);
  FT_LAUNCH((vec ? wide : narrow), to_dim3(l.grid), to_dim3(l.block), 0, ctx.stream())(args..., n);
  FT_CUDA_CHECK_LAUNCH(ctx, op, {"n", n});
}

template <typename Kernel, typename... Args>
void launch_elementwise(CudaContext& ctx, const char* op, int64_t n, Kernel kernel, Args... args) {
  require(n >= 0, op, "negative size", {{"n", n}});
  if (n == 0) return;
  const LaunchShape l = elementwise_launch(n);
  FT_LAUNCH(kernel, to_dim3(l.grid), to_dim3(l.block), 0, ctx.stream())(args..., n);
  FT_CUDA_CHECK_LAUNCH(ctx, op, {"n", n});
}

}  // namespace

void add_inplace(CudaContext& ctx, float* y, const float* x, int64_t n) {
  launch_vectorised<4, float*, const float*>(ctx, "add_inplace", n, add_kernel<4>, add_kernel<1>, y, x);
}

void to_bf16(CudaContext& ctx, uint16_t* y, const float* x, int64_t n) {
  launch_vectorised<8, uint16_t*, const float*>(ctx, "to_bf16", n, to_bf16_kernel<8>, to_bf16_kernel<1>, y, x);
}

void to_f16(CudaContext& ctx, uint16_t* y, const float* x, int64_t n) {
  launch_elementwise(ctx, "to_f16", n, to_f16_kernel, y, x);
}

void widen_bf16(CudaContext& ctx, float* y, const uint16_t* x, int64_t n) {
  launch_elementwise(ctx, "widen_bf16", n, bf16_to_f32_kernel, y, x);
}

void from_bf16(CudaContext& ctx, float* y, const uint16_t* x, int64_t n) {
  launch_elementwise(ctx, "from_bf16", n, bf16_to_f32_kernel, y, x);
}

void widen_f16(CudaContext& ctx, float* y, const uint16_t* x, int64_t n) {
  launch_elementwise(ctx, "widen_f16", n, f16_to_f32_kernel, y, x);
}

void to_fp16(CudaContext& ctx, uint16_t* y, const float* x, int64_t n) {
  launch_elementwise(ctx, "to_fp16", n, to_f16_kernel, y, x);
}

void from_fp16(CudaContext& ctx, float* y, const uint16_t* x, int64_t n) {
  launch_elementwise(ctx, "from_fp16", n, f16_to_f32_kernel, y, x);
}

void sum_squares(CudaContext& ctx, double* sum, const float* x, int64_t n) {
  require(n >= 0, "sum_squares", "negative size", {{"n", n}});
  if (n == 0) return;
  auto* partial = static_cast<double*>(ctx.scratch(kSumSquaresBlocks * sizeof(double), "sum_squares"));
  const LaunchShape l = sum_squares_launch();
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
  launch_elementwise(ctx, "powersgd_error_feedback", n, error_feedback_kernel, error, grad, approx, ranks);
}

}  // namespace ft::cuda

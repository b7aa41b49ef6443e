// Softmax cross-entropy on a chunk of logits, one block per row (launch.h row_launch): the row's
// max, then Σ exp(z − max) in double (block reductions in a fixed order), as the reference.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/launch.h"
#include "backends/cuda/op_math.h"
#include "backends/cuda/reduce.cuh"
#include "backends/cuda/store.cuh"

namespace ft::cuda {

namespace {

__global__ void xent_forward_kernel(float* loss, float* lse, const float* logits, const int32_t* targets, int64_t N,
                                    int64_t V) {
  FT_SHARED(float, red_max, kRowThreads / kWarp);
  FT_SHARED(double, red_sum, kRowThreads / kWarp);
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const float* z = logits + n * V;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) mx = fmaxf(mx, z[j]);
    mx = block_max(mx, red_max);
    double sum = 0;
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) sum += math::xent_term(z[j], mx);
    sum = block_sum(sum, red_sum);
    if (threadIdx.x == 0) {
      const double l = math::xent_lse(mx, sum);
      lse[n] = static_cast<float>(l);
      loss[n] = math::xent_loss(l, z, targets[n], V);
    }
  }
}

// Elementwise per row; dlogits may alias logits (each element is read, then written, by one thread).
template <typename Out>
__global__ void xent_backward_kernel(Out* dlogits, const float* logits, const float* lse, const int32_t* targets,
                                     int64_t N, int64_t V, float scale) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const int32_t t = targets[n];
    const float l = lse[n];
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x)
      store(dlogits + n * V + j, math::xent_grad(logits[n * V + j], l, j, t, scale));
  }
}

template <typename Out>
void backward(CudaContext& ctx, Out* dlogits, const float* logits, const float* lse, const int32_t* targets, int64_t N,
              int64_t V, float scale) {
  require(N >= 0 && V >= 0, "xent_backward", "negative size", {{"N", N}, {"V", V}});
  if (N == 0 || V == 0) return;
  const LaunchShape l = row_launch(N);
  FT_LAUNCH(xent_backward_kernel, to_dim3(l.grid), to_dim3(l.block), 0, ctx.stream())
  (dlogits, logits, lse, targets, N, V, scale);
  FT_CUDA_CHECK_LAUNCH(ctx, "xent_backward", {"N", N}, {"V", V});
}

}  // namespace

void xent_forward(CudaContext& ctx, float* loss, float* lse, const float* logits, const int32_t* targets, int64_t N,
                  int64_t V) {
  require(N >= 0 && V > 0, "xent_forward", "bad sizes (need N >= 0, V > 0)", {{"N", N}, {"V", V}});
  if (N == 0) return;
  const LaunchShape l = row_launch(N);
  FT_LAUNCH(xent_forward_kernel, to_dim3(l.grid), to_dim3(l.block), 0, ctx.stream())(loss, lse, logits, targets, N, V);
  FT_CUDA_CHECK_LAUNCH(ctx, "xent_forward", {"N", N}, {"V", V});
}

void xent_backward(CudaContext& ctx, float* dlogits, const float* logits, const float* lse, const int32_t* targets,
                   int64_t N, int64_t V, float scale) {
  backward(ctx, dlogits, logits, lse, targets, N, V, scale);
}

void xent_backward_bf16(CudaContext& ctx, uint16_t* dlogits, const float* logits, const float* lse,
                        const int32_t* targets, int64_t N, int64_t V, float scale) {
  backward(ctx, dlogits, logits, lse, targets, N, V, scale);
}

}  // namespace ft::cuda

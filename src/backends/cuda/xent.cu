// Softmax cross-entropy on a chunk of logits, one block per row (launch.h row_launch): the row's
// max, then Σ exp(z − max) in double (block reductions in a fixed order), as the reference. The
// backward in 16-byte groups of the row where it allows.
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

// Elementwise per row, in W-wide groups of the row: W = 4 (16-byte loads of the logits, 16-byte fp32
// or 8-byte bf16 stores) when V is a multiple of 4 and both pointers are 16-byte aligned, else 1.
// dlogits may alias logits (each group is read, then written, by one thread).
template <int W, typename Out>
__global__ void xent_backward_kernel(Out* dlogits, const float* logits, const float* lse, const int32_t* targets,
                                     int64_t N, int64_t V, float scale) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const int32_t t = targets[n];
    const float l = lse[n];
    const float* z = logits + n * V;
    Out* d = dlogits + n * V;
    for (int64_t j = static_cast<int64_t>(threadIdx.x) * W; j < V; j += static_cast<int64_t>(blockDim.x) * W) {
      float zv[W], g[W];
      load_vec<W>(z + j, zv);
      for (int k = 0; k < W; ++k) g[k] = math::xent_grad(zv[k], l, j + k, t, scale);
      store_vec<W>(d + j, g);
    }
  }
}

template <typename Out>
void backward(CudaContext& ctx, Out* dlogits, const float* logits, const float* lse, const int32_t* targets, int64_t N,
              int64_t V, float scale) {
  require(N >= 0 && V >= 0, "xent_backward", "negative size", {{"N", N}, {"V", V}});
  if (N == 0 || V == 0) return;
  const LaunchShape l = row_launch(N);
  const bool wide = vector_width(4, V, dlogits, logits) == 4;
  FT_LAUNCH((wide ? xent_backward_kernel<4, Out> : xent_backward_kernel<1, Out>), to_dim3(l.grid), to_dim3(l.block), 0,
            ctx.stream())
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

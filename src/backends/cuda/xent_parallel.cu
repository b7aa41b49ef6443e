// Vocab-parallel cross-entropy's row ops (op_decls.inc, "Vocab-parallel cross-entropy"): one
// thread per row, grid-stride; the combine ops in double, as the reference.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/launch.h"
#include "backends/cuda/op_math.h"
#include "backends/cuda/reduce.cuh"

namespace ft::cuda {

namespace {

#define FT_ROWS(n, N) \
  for (int64_t n = first_index(blockIdx.x, blockDim.x, threadIdx.x); n < (N); n += grid_stride(gridDim.x, blockDim.x))

__global__ void shard_targets_kernel(int32_t* local, const int32_t* targets, int64_t N, int64_t v0, int64_t V) {
  FT_ROWS(n, N) local[n] = math::xent_shard_target(targets[n], v0, V);
}

__global__ void target_logit_kernel(float* target_logit, const float* logits, const int32_t* targets, int64_t N,
                                    int64_t V) {
  FT_ROWS(n, N) {
    const int64_t t = targets[n];
    target_logit[n] = t >= 0 && t < V ? logits[n * V + t] : 0.0f;
  }
}

__global__ void combine_max_kernel(double* row_max, const float* lse, int64_t N) {
  FT_ROWS(n, N) row_max[n] = static_cast<double>(lse[n]);
}

__global__ void combine_sums_kernel(double* sums, const float* lse, const float* target_logit, const double* row_max,
                                    int64_t N) {
  FT_ROWS(n, N) {
    sums[n] = math::xent_combine_term(lse[n], row_max[n]);
    sums[N + n] = static_cast<double>(target_logit[n]);
  }
}

__global__ void combine_finish_kernel(float* lse, float* target_logit, const double* row_max, const double* sums,
                                      int64_t N) {
  FT_ROWS(n, N) {
    lse[n] = math::xent_combined_lse(row_max[n], sums[n]);
    target_logit[n] = static_cast<float>(sums[N + n]);
  }
}

__global__ void loss_from_rows_kernel(float* loss, const float* lse, const float* target_logit, const int32_t* targets,
                                      int64_t N) {
  FT_ROWS(n, N) loss[n] = math::xent_row_loss(lse[n], target_logit[n], targets[n]);
}

template <typename Kernel, typename... Args>
void launch_rows(CudaContext& ctx, const char* op, int64_t N, Kernel kernel, Args... args) {
  require(N >= 0, op, "negative size", {{"N", N}});
  if (N == 0) return;
  const LaunchShape l = elementwise_launch(N);
  FT_LAUNCH(kernel, to_dim3(l.grid), to_dim3(l.block), 0, ctx.stream())(args...);
  FT_CUDA_CHECK_LAUNCH(ctx, op, {"N", N});
}

}  // namespace

void xent_shard_targets(CudaContext& ctx, int32_t* local, const int32_t* targets, int64_t N, int64_t v0, int64_t V) {
  launch_rows(ctx, "xent_shard_targets", N, shard_targets_kernel, local, targets, N, v0, V);
}

void xent_target_logit(CudaContext& ctx, float* target_logit, const float* logits, const int32_t* targets, int64_t N,
                       int64_t V) {
  launch_rows(ctx, "xent_target_logit", N, target_logit_kernel, target_logit, logits, targets, N, V);
}

void xent_combine_max(CudaContext& ctx, double* row_max, const float* lse, int64_t N) {
  launch_rows(ctx, "xent_combine_max", N, combine_max_kernel, row_max, lse, N);
}

void xent_combine_sums(CudaContext& ctx, double* sums, const float* lse, const float* target_logit,
                       const double* row_max, int64_t N) {
  launch_rows(ctx, "xent_combine_sums", N, combine_sums_kernel, sums, lse, target_logit, row_max, N);
}

void xent_combine_finish(CudaContext& ctx, float* lse, float* target_logit, const double* row_max, const double* sums,
                         int64_t N) {
  launch_rows(ctx, "xent_combine_finish", N, combine_finish_kernel, lse, target_logit, row_max, sums, N);
}

void xent_loss_from_rows(CudaContext& ctx, float* loss, const float* lse, const float* target_logit,
                         const int32_t* targets, int64_t N) {
  launch_rows(ctx, "xent_loss_from_rows", N, loss_from_rows_kernel, loss, lse, target_logit, targets, N);
}

}  // namespace ft::cuda

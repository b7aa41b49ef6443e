// PowerSGD's device ops (op_decls.inc, "Gradient compression"): Gram–Schmidt here, the error
// feedback in elementwise.cu.
//
// gram_schmidt: one block of kRowThreads threads orthonormalises the r columns of P (n, r) one
// after another, as the reference: for each earlier column the dot product (a fixed-order block
// reduction in double), then the projection removed with the float product rounded before the
// subtraction (no fused multiply-add, as the reference's float expression); then the norm in
// double and the column divided by norm + 1e-8. r is PowerSGD's rank (a few columns), so one block
// walking n is the simplest correct version; the block reductions fix the order, so the bits do not
// change from run to run.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/launch.h"
#include "backends/cuda/op_math.h"
#include "backends/cuda/reduce.cuh"

namespace ft::cuda {

namespace {

__global__ void gram_schmidt_kernel(float* P, int64_t n, int64_t r) {
  FT_SHARED(double, red, kRowThreads / kWarp);
  for (int64_t j = 0; j < r; ++j) {
    for (int64_t k = 0; k < j; ++k) {
      double dot = 0;
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        dot += static_cast<double>(P[i * r + j]) * static_cast<double>(P[i * r + k]);
      dot = block_sum(dot, red);
      const float d = static_cast<float>(dot);
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        P[i * r + j] = __fsub_rn(P[i * r + j], __fmul_rn(d, P[i * r + k]));
      __syncthreads();
    }
    double norm = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      norm += static_cast<double>(P[i * r + j]) * static_cast<double>(P[i * r + j]);
    norm = block_sum(norm, red);
    const float inv = math::gram_schmidt_inverse_norm(norm);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) P[i * r + j] = __fmul_rn(P[i * r + j], inv);
    __syncthreads();
  }
}

}  // namespace

void gram_schmidt(CudaContext& ctx, float* P, int64_t n, int64_t r) {
  require(n >= 0 && r >= 0, "gram_schmidt", "negative size", {{"n", n}, {"r", r}});
  if (n == 0 || r == 0) return;
  FT_LAUNCH(gram_schmidt_kernel, 1, kRowThreads, 0, ctx.stream())(P, n, r);
  FT_CUDA_CHECK_LAUNCH(ctx, "gram_schmidt", {"n", n}, {"r", r});
}

}  // namespace ft::cuda

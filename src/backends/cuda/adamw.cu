// AdamW on fp32 master weights (torch.optim.AdamW semantics, op_decls.inc): one thread per
// element; the step's scalars computed once on the host in double (op_math.h adamw_scalars).
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/launch.h"
#include "backends/cuda/op_math.h"
#include "backends/cuda/reduce.cuh"

namespace ft::cuda {

namespace {

__global__ void adamw_kernel(float* param, float* m, float* v, uint16_t* param_bf16, const float* grad, int64_t n,
                             math::AdamwScalars s) {
  for (int64_t i = first_index(blockIdx.x, blockDim.x, threadIdx.x); i < n; i += grid_stride(gridDim.x, blockDim.x)) {
    float p = param[i], mi = m[i], vi = v[i];
    math::adamw_update(&p, &mi, &vi, grad[i], s);
    param[i] = p;
    m[i] = mi;
    v[i] = vi;
    if (param_bf16) param_bf16[i] = math::to_bf16(p);
  }
}

}  // namespace

void adamw_step(CudaContext& ctx, float* param, float* m, float* v, uint16_t* param_bf16, const float* grad, int64_t n,
                float lr, float beta1, float beta2, float eps, float weight_decay, int64_t step, float grad_scale) {
  require(n >= 0 && step >= 1, "adamw_step", "bad arguments (need n >= 0, step >= 1)", {{"n", n}, {"step", step}});
  if (n == 0) return;
  const math::AdamwScalars s = math::adamw_scalars(lr, beta1, beta2, eps, weight_decay, step, grad_scale);
  const LaunchShape l = elementwise_launch(n);
  adamw_kernel<<<to_dim3(l.grid), to_dim3(l.block), 0, ctx.stream()>>>(param, m, v, param_bf16, grad, n, s);
  FT_CUDA_CHECK_LAUNCH(ctx, "adamw_step", {"n", n}, {"step", step});
}

}  // namespace ft::cuda

// AdamW on fp32 master weights (torch.optim.AdamW semantics, op_decls.inc): one thread per four
// elements (16-byte accesses where the buffers are aligned, else one per element); the step's
// scalars computed once on the host in double (op_math.h adamw_scalars).
#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/launch.h"
#include "backends/cuda/op_math.h"
#include "backends/cuda/reduce.cuh"
#include "backends/cuda/store.cuh"

namespace ft::cuda {

namespace {

// V = 4: param, m, v and grad in float4, the bf16 copy in one 8-byte store; then the n % V tail.
template <int V>
__device__ __forceinline__ void adamw_group(float* param, float* m, float* v, uint16_t* param_bf16, const float* grad,
                                            const math::AdamwScalars& s) {
  float p[V], mi[V], vi[V], g[V];
  load_vec<V>(param, p);
  load_vec<V>(m, mi);
  load_vec<V>(v, vi);
  load_vec<V>(grad, g);
  for (int k = 0; k < V; ++k) math::adamw_update(&p[k], &mi[k], &vi[k], g[k], s);
  store_vec<V>(param, p);
  store_vec<V>(m, mi);
  store_vec<V>(v, vi);
  if (param_bf16) store_vec<V>(param_bf16, p);
}

template <int V>
__global__ void adamw_kernel(float* param, float* m, float* v, uint16_t* param_bf16, const float* grad, int64_t n,
                             math::AdamwScalars s) {
  for (int64_t g = first_index(blockIdx.x, blockDim.x, threadIdx.x); g < n / V;
       g += grid_stride(gridDim.x, blockDim.x)) {
    const int64_t i = g * V;
    adamw_group<V>(param + i, m + i, v + i, param_bf16 ? param_bf16 + i : nullptr, grad + i, s);
  }
  for (int64_t t = first_index(blockIdx.x, blockDim.x, threadIdx.x); t < n % V;
       t += grid_stride(gridDim.x, blockDim.x)) {
    const int64_t i = n / V * V + t;
    adamw_group<1>(param + i, m + i, v + i, param_bf16 ? param_bf16 + i : nullptr, grad + i, s);
  }
}

}  // namespace

void adamw_step(CudaContext& ctx, float* param, float* m, float* v, uint16_t* param_bf16, const float* grad, int64_t n,
                float lr, float beta1, float beta2, float eps, float weight_decay, int64_t step, float grad_scale) {
  require(n >= 0 && step >= 1, "adamw_step", "bad arguments (need n >= 0, step >= 1)", {{"n", n}, {"step", step}});
  if (n == 0) return;
  const math::AdamwScalars s = math::adamw_scalars(lr, beta1, beta2, eps, weight_decay, step, grad_scale);
  // The bf16 copy's 4-element stores need 8-byte alignment; 16 is asked of every pointer.
  if (aligned16(param, m, v, param_bf16, grad)) {
    const LaunchShape l = elementwise_launch(std::max<int64_t>(1, n / 4));
    FT_LAUNCH(adamw_kernel<4>, to_dim3(l.grid), to_dim3(l.block), 0, ctx.stream())(param, m, v, param_bf16, grad, n, s);
  } else {
    const LaunchShape l = elementwise_launch(n);
    FT_LAUNCH(adamw_kernel<1>, to_dim3(l.grid), to_dim3(l.block), 0, ctx.stream())(param, m, v, param_bf16, grad, n, s);
  }
  FT_CUDA_CHECK_LAUNCH(ctx, "adamw_step", {"n", n}, {"step", step});
}

}  // namespace ft::cuda

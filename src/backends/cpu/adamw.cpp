// AdamW, torch.optim.AdamW semantics (see op_decls.inc), one fused pass over param, m, v, grad
// (and the bf16 copy). Parallel over the elements. The step's scalars come computed
// (kernels/adamw_scalars.h: in double on the host, as PyTorch computes them in Python floats).

#include "backends/cpu/simd.h"
#include "kernels/ops.h"

namespace ft::cpu {

using namespace simd;

// param, m, v (n) updated in place; param_bf16 (n) = bf16(param) when not null.
void adamw_step(const ExecContext&, float* param, float* m, float* v, uint16_t* param_bf16, const float* grad,
                int64_t n, const AdamwStepScalars* step, float beta1, float beta2, float eps, float weight_decay) {
  const float lr = step->lr, grad_scale = step->grad_scale;
  const F32x16 step_size = set1(step->step_size);
  const F32x16 bc2_sqrt = set1(step->bc2_sqrt);
  const F32x16 decay = set1(1.0f - lr * weight_decay);
  const F32x16 b1 = set1(beta1), b2 = set1(beta2), one_b1 = set1(1.0f - beta1), one_b2 = set1(1.0f - beta2);
  const F32x16 gs = set1(grad_scale), epsv = set1(eps);
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t i = 0; i < n; i += kLanes) {
    int w = width(n - i);
    F32x16 g = load(grad + i, w) * gs;
    F32x16 mi = fmadd(b1, load(m + i, w), one_b1 * g);      // m = b1 m + (1 − b1) g
    F32x16 vi = fmadd(b2, load(v + i, w), one_b2 * g * g);  // v = b2 v + (1 − b2) g²
    F32x16 denom = sqrt(vi) / bc2_sqrt + epsv;
    F32x16 p = load(param + i, w) * decay;  // decoupled weight decay
    p = p - step_size * mi / denom;
    store(m + i, mi, w);
    store(v + i, vi, w);
    store(param + i, p, w);
    if (param_bf16) store_bf16(param_bf16 + i, p, w);
  }
}

}  // namespace ft::cpu

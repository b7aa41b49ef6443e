// RMSNorm over the channels of each row: y = x · rstd · w, rstd = (mean(x²) + eps)^-1/2.
// One row (C floats) stays in L1 between its two sweeps, so each op reads its inputs from memory
// once. Parallel over rows. Row reductions run in double, as in the reference: Σ x² of large
// activations must overflow no earlier than the reference does (a diverging run then reports a
// NaN loss instead of silently normalising to 0), and the products are ordered so that only
// normalised values (x · rstd) meet the weights and gradients.
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "backends/cpu/simd.h"
#include "backends/cpu/thread_scratch.h"
#include "kernels/ops.h"

namespace ft::cpu {

using namespace simd;

namespace {
// out(N, C) (fp32 or bf16), rstd(N) from x(N, C), weight(C).
template <typename Out>
void rmsnorm_forward_impl(Out* out, float* rstd, const float* x, const float* weight, int64_t N, int64_t C, float eps) {
#pragma omp parallel for schedule(static) if (N * C > 8192)
  for (int64_t n = 0; n < N; ++n) {
    const float* xr = x + n * C;
    double ss = sum_squares_f64(xr, C);
    float r = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(C) + static_cast<double>(eps)));
    rstd[n] = r;
    F32x16 rv = set1(r);
    Out* o = out + n * C;
    for (int64_t c = 0; c < C; c += kLanes) {
      int w = width(C - c);
      store(o + c, load(xr + c, w) * rv * load(weight + c, w), w);
    }
  }
}
}  // namespace

void rmsnorm_forward(const ExecContext&, float* out, float* rstd, const float* x, const float* weight, int64_t N,
                     int64_t C, float eps) {
  rmsnorm_forward_impl(out, rstd, x, weight, N, C, eps);
}
void rmsnorm_forward_bf16(const ExecContext&, uint16_t* out, float* rstd, const float* x, const float* weight,
                          int64_t N, int64_t C, float eps) {
  rmsnorm_forward_impl(out, rstd, x, weight, N, C, eps);
}

// dx(N, C) = r (dy ∘ w − x · m) + dres,  m = r²/C · Σ_c dy w x     (written; dres optional)
// dweight(C) += Σ_n dy ∘ (x · r)                                     (accumulated)
// Each thread sums dweight over its contiguous block of rows into its own partial; the partials
// are added in thread order afterwards (deterministic for a given thread count). The residual is
// added to the rounded fp32 gradient, as a separate add_inplace would add it.
void rmsnorm_backward(const ExecContext&, float* dx, float* dweight, const float* dout, const float* dresidual,
                      const float* x, const float* weight, const float* rstd, int64_t N, int64_t C) {
  int max_threads = (N * C > 8192) ? omp_get_max_threads() : 1;
  ThreadScratch partial(C, max_threads);  // (threads, C) dweight partials
  int used = 1;
#pragma omp parallel num_threads(max_threads)
  {
    int nt = omp_get_num_threads(), t = omp_get_thread_num();
    if (t == 0) used = nt;
    float* dw = partial.slice(t);
    std::fill(dw, dw + C, 0.0f);
    int64_t n0 = N * t / nt, n1 = N * (t + 1) / nt;
    for (int64_t n = n0; n < n1; ++n) {
      const float* xr = x + n * C;
      const float* dy = dout + n * C;
      double r = rstd[n];
      double m = r * r * dot3_f64(dy, weight, xr, C) / static_cast<double>(C);
      F32x16 rv = set1(static_cast<float>(r)), mv = set1(static_cast<float>(m));
      float* dxr = dx + n * C;
      const float* dres = dresidual ? dresidual + n * C : nullptr;
      for (int64_t c = 0; c < C; c += kLanes) {
        int w = width(C - c);
        F32x16 g = load(dy + c, w), xv = load(xr + c, w);
        F32x16 d = rv * fnmadd(xv, mv, g * load(weight + c, w));
        store(dxr + c, dres ? d + load(dres + c, w) : d, w);
        store(dw + c, fmadd(g, xv * rv, load(dw + c, w)), w);
      }
    }
  }
  // dweight += partials, in thread order; parallel over column blocks.
#pragma omp parallel for schedule(static) if (C * used > 65536)
  for (int64_t c = 0; c < C; c += kLanes) {
    int w = width(C - c);
    F32x16 s = load(partial.slice(0) + c, w);
    for (int t = 1; t < used; ++t) s = s + load(partial.slice(t) + c, w);
    store(dweight + c, load(dweight + c, w) + s, w);
  }
}

}  // namespace ft::cpu

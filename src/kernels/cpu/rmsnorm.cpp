// RMSNorm over the channels of each row: y = x · rstd · w, rstd = (mean(x²) + eps)^-1/2.
// One row (C floats) stays in L1 between its two sweeps, so each op reads its inputs from memory
// once. Parallel over rows.
#include <omp.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/simd.h"
#include "kernels/ops.h"

namespace ft::cpu {

using namespace simd;

namespace {
// sum_c a[c] * b[c] * e[c] over one row (b or e may repeat a).
inline float dot3(const float* a, const float* b, const float* e, int64_t C) {
  F32x16 acc = zero();
  for (int64_t c = 0; c < C; c += kLanes) {
    int w = width(C - c);
    acc = fmadd(load(a + c, w) * load(b + c, w), load(e + c, w), acc);
  }
  return reduce_add(acc);
}
}  // namespace

// out(N, C), rstd(N) from x(N, C), weight(C).
void rmsnorm_forward(float* out, float* rstd, const float* x, const float* weight, int64_t N, int64_t C,
                     float eps) {
#pragma omp parallel for schedule(static) if (N * C > 8192)
  for (int64_t n = 0; n < N; ++n) {
    const float* xr = x + n * C;
    F32x16 ss = zero();
    for (int64_t c = 0; c < C; c += kLanes) {
      int w = width(C - c);
      F32x16 v = load(xr + c, w);
      ss = fmadd(v, v, ss);
    }
    float r = static_cast<float>(1.0 / std::sqrt(static_cast<double>(reduce_add(ss)) / static_cast<double>(C) +
                                                 static_cast<double>(eps)));
    rstd[n] = r;
    F32x16 rv = set1(r);
    float* o = out + n * C;
    for (int64_t c = 0; c < C; c += kLanes) {
      int w = width(C - c);
      store(o + c, load(xr + c, w) * rv * load(weight + c, w), w);
    }
  }
}

// dx(N, C) = r (dy ∘ w) − x · r³/C · Σ_c dy w x     (written)
// dweight(C) += Σ_n dy ∘ x · r                       (accumulated)
// Each thread sums dweight over its contiguous block of rows into its own partial; the partials
// are added in thread order afterwards (deterministic for a given thread count).
void rmsnorm_backward(float* dx, float* dweight, const float* dout, const float* x, const float* weight,
                      const float* rstd, int64_t N, int64_t C) {
  int max_threads = (N * C > 8192) ? omp_get_max_threads() : 1;
  std::vector<float> partial(static_cast<size_t>(max_threads * C), 0.0f);
  int used = 1;
#pragma omp parallel num_threads(max_threads)
  {
    int nt = omp_get_num_threads(), t = omp_get_thread_num();
    if (t == 0) used = nt;
    float* dw = partial.data() + t * C;
    int64_t n0 = N * t / nt, n1 = N * (t + 1) / nt;
    for (int64_t n = n0; n < n1; ++n) {
      const float* xr = x + n * C;
      const float* dy = dout + n * C;
      float r = rstd[n];
      float dot = dot3(dy, weight, xr, C);
      F32x16 rv = set1(r), k = set1(r * r * r * dot / static_cast<float>(C));
      float* dxr = dx + n * C;
      for (int64_t c = 0; c < C; c += kLanes) {
        int w = width(C - c);
        F32x16 g = load(dy + c, w), xv = load(xr + c, w);
        store(dxr + c, fnmadd(xv, k, rv * g * load(weight + c, w)), w);
        store(dw + c, fmadd(g * xv, rv, load(dw + c, w)), w);
      }
    }
  }
  // dweight += partials, in thread order; parallel over column blocks.
#pragma omp parallel for schedule(static) if (C * used > 65536)
  for (int64_t c = 0; c < C; c += kLanes) {
    int w = width(C - c);
    F32x16 s = load(partial.data() + c, w);
    for (int t = 1; t < used; ++t) s = s + load(partial.data() + t * C + c, w);
    store(dweight + c, load(dweight + c, w) + s, w);
  }
}

}  // namespace ft::cpu

// KV-cache writes and attention for generation (layouts: kernels/op_decls.inc).
//
// Decoding reads the whole cache once per new token, so it is memory-bound: one task per
// (sequence, head, new token); each scores its visible keys into a per-thread row of max_T
// floats (O(T), never (T, T)), takes an exact softmax, then sums the values.
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cpu/attention_gemm.h"
#include "backends/cpu/thread_scratch.h"
#include "kernels/attention_checks.h"
#include "kernels/ops.h"

namespace ft::cpu {

void kv_cache_write(const ExecContext&, float* k_cache, float* v_cache, const float* qkv, int64_t B, int64_t T,
                    int64_t H, int64_t Hkv, int64_t D, int64_t pos0, int64_t max_T) {
  check_decode_sizes("kv_cache_write", B, pos0, T, H, Hkv, D, max_T);
  const int64_t row = (H + 2 * Hkv) * D;
  const size_t bytes = sizeof(float) * static_cast<size_t>(D);
#pragma omp parallel for schedule(static) if (B * T * Hkv * D > (1 << 16))
  for (int64_t bt = 0; bt < B * T; ++bt) {
    const int64_t b = bt / T, t = bt % T;
    for (int64_t kh = 0; kh < Hkv; ++kh) {
      const int64_t dst = ((b * Hkv + kh) * max_T + pos0 + t) * D;
      std::memcpy(k_cache + dst, qkv + bt * row + (H + kh) * D, bytes);
      std::memcpy(v_cache + dst, qkv + bt * row + (H + Hkv + kh) * D, bytes);
    }
  }
}

void attention_decode(const ExecContext&, float* out, const float* qkv, const float* k_cache, const float* v_cache,
                      int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv, int64_t D, int64_t max_T) {
  check_decode_sizes("attention_decode", B, Tk - Tq, Tq, H, Hkv, D, max_T);
  using namespace attn;
  const int64_t row = (H + 2 * Hkv) * D, group = H / Hkv, Dp = (D + 15) / 16 * 16;
  const float c = static_cast<float>(1.4426950408889634 / std::sqrt(static_cast<double>(D)));
  ThreadScratch buf(Tk + 16 + Dp);  // scores (padded to whole vectors), then the output row
#pragma omp parallel
  {
    float* s = buf.slice(omp_get_thread_num());
    float* acc = s + (Tk + 15) / 16 * 16;
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < B * H * Tq; ++task) {
      const int64_t b = task / (H * Tq), h = (task / Tq) % H, t = task % Tq;
      const int64_t n = Tk - Tq + t + 1;  // visible cached positions
      const float* q = qkv + (b * Tq + t) * row + h * D;
      const float* kc = k_cache + (b * Hkv + h / group) * max_T * D;
      const float* vc = v_cache + (b * Hkv + h / group) * max_T * D;
      // Scores in the log2 domain.
      for (int64_t j = 0; j < n; ++j) {
        F32x16 dot = zero();
        for (int64_t d = 0; d < D; d += 16) {
          const int w = width(D - d);
          dot = fmadd(load(q + d, w), load(kc + j * D + d, w), dot);
        }
        s[j] = reduce_add(dot) * c;
      }
      F32x16 mx = set1(-std::numeric_limits<float>::infinity());
      for (int64_t j = 0; j < n; j += 16) mx = max(mx, pad_neg_inf(load(s + j, width(n - j)), width(n - j)));
      const F32x16 m = set1(reduce_max(mx));
      F32x16 sum = zero();
      for (int64_t j = 0; j < n; j += 16) {
        const int w = width(n - j);
        const F32x16 p = select(lanes(w), exp2_nonpos(load(s + j) - m), zero());
        store(s + j, p, w);
        sum = sum + p;
      }
      const float inv = 1.0f / reduce_add(sum);
      for (int64_t d = 0; d < Dp; ++d) acc[d] = 0.0f;
      for (int64_t j = 0; j < n; ++j) {
        const F32x16 p = set1(s[j]);
        for (int64_t d = 0; d < D; d += 16) store(acc + d, fmadd(p, load(vc + j * D + d, width(D - d)), load(acc + d)));
      }
      float* o = out + (b * Tq + t) * H * D + h * D;
      for (int64_t d = 0; d < D; ++d) o[d] = acc[d] * inv;
    }
  }
}

}  // namespace ft::cpu

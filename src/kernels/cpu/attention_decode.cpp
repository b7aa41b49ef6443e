// KV-cache writes and attention for generation (layouts: kernels/op_decls.inc).
//
// Decoding reads the whole cache once per new token, so it is memory-bound: one task per
// (sequence, head, new token); each scores its visible keys into a per-thread row of max_T
// floats (O(T), never (T, T)), takes an exact softmax, then sums the values.
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/attention_checks.h"
#include "kernels/cpu/thread_scratch.h"
#include "kernels/ops.h"

#if defined(__AVX512F__)
#include "kernels/cpu/attention_gemm.h"
#endif

namespace ft::cpu {

void kv_cache_write(float* k_cache, float* v_cache, const float* qkv, int64_t B, int64_t T,
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

void attention_decode(float* out, const float* qkv, const float* k_cache, const float* v_cache,
                      int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv, int64_t D,
                      int64_t max_T) {
  check_decode_sizes("attention_decode", B, Tk - Tq, Tq, H, Hkv, D, max_T);
#if defined(__AVX512F__)
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
        __m512 dot = _mm512_setzero_ps();
        for (int64_t d = 0; d < D; d += 16) {
          const __mmask16 m = lanes(D - d);
          dot = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + d),
                                _mm512_maskz_loadu_ps(m, kc + j * D + d), dot);
        }
        s[j] = _mm512_reduce_add_ps(dot) * c;
      }
      __m512 mx = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
      for (int64_t j = 0; j < n; j += 16)
        mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(mx, lanes(n - j), s + j));
      const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
      __m512 sum = _mm512_setzero_ps();
      for (int64_t j = 0; j < n; j += 16) {
        const __mmask16 k = lanes(n - j);
        const __m512 p = _mm512_maskz_mov_ps(k, exp2_ps(_mm512_sub_ps(_mm512_loadu_ps(s + j), m)));
        _mm512_mask_storeu_ps(s + j, k, p);
        sum = _mm512_add_ps(sum, p);
      }
      const float inv = 1.0f / _mm512_reduce_add_ps(sum);
      for (int64_t d = 0; d < Dp; ++d) acc[d] = 0.0f;
      for (int64_t j = 0; j < n; ++j) {
        const __m512 p = _mm512_set1_ps(s[j]);
        for (int64_t d = 0; d < D; d += 16) {
          const __mmask16 k = lanes(D - d);
          _mm512_storeu_ps(acc + d, _mm512_fmadd_ps(p, _mm512_maskz_loadu_ps(k, vc + j * D + d),
                                                    _mm512_loadu_ps(acc + d)));
        }
      }
      float* o = out + (b * Tq + t) * H * D + h * D;
      for (int64_t d = 0; d < D; ++d) o[d] = acc[d] * inv;
    }
  }
#else
  ref::attention_decode(out, qkv, k_cache, v_cache, B, Tq, Tk, H, Hkv, D, max_T);
#endif
}

}  // namespace ft::cpu

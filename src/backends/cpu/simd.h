// A 16-lane fp32 vector for the CPU kernels, chosen at build time (-march): one __m512 with
// AVX-512, two __m256 halves with AVX2 + FMA (FT_ARCH=x86-64-v3), a plain array the compiler
// vectorises otherwise. Kernels are written once against it.
//
//   using namespace ft::cpu::simd;
//   for (int64_t i = 0; i < n; i += kLanes) {
//     int w = width(n - i);                       // 16, or fewer in the tail
//     F32x16 x = load(p + i, w);                  // lanes >= w read as 0
//     store(q + i, fmadd(x, set1(2.0f), load(q + i, w)), w);
//   }
//
// exp() is accurate to about 1 ulp on [-87, 88] (Cody-Waite reduction + degree-7 polynomial),
// returns 0 below, +inf above and NaN for NaN; the three versions return the same bits.
// sum_squares_f64 / dot3_f64 reduce in double. Mask16 selects lanes (lanes(n): the first n,
// lanes_from(k): k and above) for select() and masked load/store.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "tensor/dtype.h"

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

namespace ft::cpu::simd {

constexpr int kLanes = 16;

// Number of valid lanes in a block that starts `remaining` elements before the end.
inline int width(int64_t remaining) {
  return remaining >= kLanes ? kLanes : static_cast<int>(remaining);
}

inline int clamp_lanes(int64_t n) {
  return n <= 0 ? 0 : n >= kLanes ? kLanes : static_cast<int>(n);
}

#if defined(__AVX512F__)
#define FT_SIMD_ISA "avx512"

struct F32x16 {
  __m512 v;
};
struct Mask16 {
  __mmask16 k;
};

inline __mmask16 lane_mask(int w) {
  return static_cast<__mmask16>((1u << w) - 1u);
}
inline Mask16 lanes(int64_t n) {
  return {lane_mask(clamp_lanes(n))};
}
inline Mask16 lanes_from(int64_t k) {
  return {static_cast<__mmask16>(~lane_mask(clamp_lanes(k)))};
}

inline F32x16 load(const float* p, int w = kLanes) {
  return {w == kLanes ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(lane_mask(w), p)};
}
inline F32x16 load(const float* p, Mask16 m) {
  return {_mm512_maskz_loadu_ps(m.k, p)};
}
inline void store(float* p, F32x16 x, int w = kLanes) {
  if (w == kLanes) {
    _mm512_storeu_ps(p, x.v);
  } else {
    _mm512_mask_storeu_ps(p, lane_mask(w), x.v);
  }
}
inline void store(float* p, F32x16 x, Mask16 m) {
  _mm512_mask_storeu_ps(p, m.k, x.v);
}
inline F32x16 select(Mask16 m, F32x16 a, F32x16 b) {
  return {_mm512_mask_blend_ps(m.k, b.v, a.v)};
}
inline F32x16 set1(float a) {
  return {_mm512_set1_ps(a)};
}
inline F32x16 zero() {
  return {_mm512_setzero_ps()};
}
inline F32x16 operator+(F32x16 a, F32x16 b) {
  return {_mm512_add_ps(a.v, b.v)};
}
inline F32x16 operator-(F32x16 a, F32x16 b) {
  return {_mm512_sub_ps(a.v, b.v)};
}
inline F32x16 operator*(F32x16 a, F32x16 b) {
  return {_mm512_mul_ps(a.v, b.v)};
}
inline F32x16 operator/(F32x16 a, F32x16 b) {
  return {_mm512_div_ps(a.v, b.v)};
}
inline F32x16 fmadd(F32x16 a, F32x16 b, F32x16 c) {
  return {_mm512_fmadd_ps(a.v, b.v, c.v)};
}  // a*b + c
inline F32x16 fnmadd(F32x16 a, F32x16 b, F32x16 c) {
  return {_mm512_fnmadd_ps(a.v, b.v, c.v)};
}  // c - a*b
inline F32x16 max(F32x16 a, F32x16 b) {
  return {_mm512_max_ps(a.v, b.v)};
}  // b when either is NaN
inline F32x16 min(F32x16 a, F32x16 b) {
  return {_mm512_min_ps(a.v, b.v)};
}
inline F32x16 sqrt(F32x16 a) {
  return {_mm512_sqrt_ps(a.v)};
}
inline F32x16 round(F32x16 a) {  // to the nearest integer, ties to even
  return {_mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
}
// p · 2^n for integral n (|n| <= 300), rounded once: over/underflows to inf/0 like exp.
inline F32x16 scale_pow2(F32x16 p, F32x16 n) {
  return {_mm512_maskz_scalef_ps(0xffff, p.v, n.v)};
}
// Lanes i and i + 8, then j and j + 4, ...: the same tree as the AVX2 version (equal sums).
inline float reduce_add(F32x16 a) {
  const __m256 s = _mm256_add_ps(_mm512_castps512_ps256(a.v),
                                 _mm512_castps512_ps256(_mm512_maskz_shuffle_f32x4(0xffff, a.v, a.v, 0xee)));
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  q = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
}
inline float reduce_max(F32x16 a) {
  return _mm512_reduce_max_ps(a.v);
}

// Lanes i < n read base[i · stride] (stride · 15 must fit an int), the others 0.
inline F32x16 gather(const float* base, int64_t stride, int n) {
  const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32(static_cast<int>(stride)));
  return {_mm512_mask_i32gather_ps(_mm512_setzero_ps(), lane_mask(clamp_lanes(n)), idx, base, 4)};
}

// bf16 (round to nearest even, NaN stays NaN) of 16 lanes, as 16 uint16 in a __m256i.
inline __m256i to_bf16_bits(F32x16 x) {
#if defined(__AVX512BF16__)
  return (__m256i)_mm512_cvtneps_pbh(x.v);
#else
  const __m512i u = _mm512_castps_si512(x.v);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(x.v, x.v, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
  return _mm512_cvtepi32_epi16(r);
#endif
}
// Widens w bf16 values (lanes >= w are 0).
inline F32x16 load_bf16(const uint16_t* p, int w = kLanes) {
  alignas(32) uint16_t tmp[kLanes] = {};
  if (w != kLanes) {
    std::memcpy(tmp, p, sizeof(uint16_t) * static_cast<size_t>(w));
    p = tmp;
  }
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return {_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))};
}
// fp32(fp16(x)): rounded to the nearest fp16, ties to even (overflow to inf, fp16 subnormals kept).
inline F32x16 round_f16(F32x16 x) {
  return {_mm512_cvtph_ps(_mm512_cvtps_ph(x.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))};
}

// Reductions in double, for sums whose terms can overflow fp32 (x² of |x| > 1.8e19) or whose
// accuracy matters over long rows. Tails are masked.
inline void to_f64(__m512 v, __m512d& lo, __m512d& hi) {
  lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
  hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}
// Σ x_i²
inline double sum_squares_f64(const float* x, int64_t n) {
  __m512d acc0 = _mm512_setzero_pd(), acc1 = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += kLanes) {
    __m512d lo, hi;
    to_f64(load(x + i, width(n - i)).v, lo, hi);
    acc0 = _mm512_fmadd_pd(lo, lo, acc0);
    acc1 = _mm512_fmadd_pd(hi, hi, acc1);
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(acc0, acc1));
}
// Σ a_i b_i c_i
inline double dot3_f64(const float* a, const float* b, const float* c, int64_t n) {
  __m512d acc0 = _mm512_setzero_pd(), acc1 = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += kLanes) {
    int w = width(n - i);
    __m512d alo, ahi, blo, bhi, clo, chi;
    to_f64(load(a + i, w).v, alo, ahi);
    to_f64(load(b + i, w).v, blo, bhi);
    to_f64(load(c + i, w).v, clo, chi);
    acc0 = _mm512_fmadd_pd(_mm512_mul_pd(alo, blo), clo, acc0);
    acc1 = _mm512_fmadd_pd(_mm512_mul_pd(ahi, bhi), chi, acc1);
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(acc0, acc1));
}

#elif defined(__AVX2__) && defined(__FMA__)
#define FT_SIMD_ISA "avx2"

// Lanes 0-7 in lo, 8-15 in hi; a mask lane is all ones or all zeros.
struct F32x16 {
  __m256 lo, hi;
};
struct Mask16 {
  __m256i lo, hi;
};

namespace detail {
// 16 all-ones then 16 zeros: the first n lanes of a mask are kOnesThenZeros + 16 - n.
alignas(64) inline constexpr int32_t kOnesThenZeros[32] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                           -1, -1, -1, -1, -1, -1, -1, -1};
alignas(64) inline constexpr int32_t kZerosThenOnes[32] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
inline Mask16 mask_at(const int32_t* p) {
  return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8))};
}
template <typename F>
inline F32x16 both(F32x16 a, F f) {
  return {f(a.lo), f(a.hi)};
}
// 2^n for integral n in [-126, 127], built in the exponent field.
inline __m256 pow2i(__m256i n) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
}
// p · 2^n in two exact-range steps (n/2 and the rest), so |n| up to ~250 rounds once like scalef.
inline __m256 scale_pow2(__m256 p, __m256 nf) {
  const __m256i n = _mm256_cvtps_epi32(nf);
  const __m256i n1 = _mm256_srai_epi32(n, 1);
  return _mm256_mul_ps(_mm256_mul_ps(p, pow2i(n1)), pow2i(_mm256_sub_epi32(n, n1)));
}
inline __m256i to_bf16_u32(__m256 x) {
  const __m256i u = _mm256_castps_si256(x);
  const __m256i hi16 = _mm256_srli_epi32(u, 16);
  const __m256i odd = _mm256_and_si256(hi16, _mm256_set1_epi32(1));
  const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff))), 16);
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  return _mm256_blendv_epi8(r, _mm256_or_si256(hi16, _mm256_set1_epi32(0x40)), nan);
}
inline float hsum(__m128 v) {
  v = _mm_add_ps(v, _mm_movehl_ps(v, v));
  v = _mm_add_ss(v, _mm_movehdup_ps(v));
  return _mm_cvtss_f32(v);
}
inline double hsum(__m256d v) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}
}  // namespace detail

inline Mask16 lanes(int64_t n) {
  return detail::mask_at(detail::kOnesThenZeros + 16 - clamp_lanes(n));
}
inline Mask16 lanes_from(int64_t k) {
  return detail::mask_at(detail::kZerosThenOnes + 16 - clamp_lanes(k));
}

inline F32x16 load(const float* p, Mask16 m) {
  return {_mm256_maskload_ps(p, m.lo), _mm256_maskload_ps(p + 8, m.hi)};
}
inline F32x16 load(const float* p, int w = kLanes) {
  if (w == kLanes) return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)};
  return load(p, lanes(w));
}
inline void store(float* p, F32x16 x, Mask16 m) {
  _mm256_maskstore_ps(p, m.lo, x.lo);
  _mm256_maskstore_ps(p + 8, m.hi, x.hi);
}
inline void store(float* p, F32x16 x, int w = kLanes) {
  if (w == kLanes) {
    _mm256_storeu_ps(p, x.lo);
    _mm256_storeu_ps(p + 8, x.hi);
  } else if (w > 8) {
    _mm256_storeu_ps(p, x.lo);
    _mm256_maskstore_ps(p + 8, lanes(w).hi, x.hi);
  } else {
    _mm256_maskstore_ps(p, lanes(w).lo, x.lo);
  }
}
inline F32x16 select(Mask16 m, F32x16 a, F32x16 b) {
  return {_mm256_blendv_ps(b.lo, a.lo, _mm256_castsi256_ps(m.lo)),
          _mm256_blendv_ps(b.hi, a.hi, _mm256_castsi256_ps(m.hi))};
}
inline F32x16 set1(float a) {
  return {_mm256_set1_ps(a), _mm256_set1_ps(a)};
}
inline F32x16 zero() {
  return {_mm256_setzero_ps(), _mm256_setzero_ps()};
}
inline F32x16 operator+(F32x16 a, F32x16 b) {
  return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)};
}
inline F32x16 operator-(F32x16 a, F32x16 b) {
  return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)};
}
inline F32x16 operator*(F32x16 a, F32x16 b) {
  return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)};
}
inline F32x16 operator/(F32x16 a, F32x16 b) {
  return {_mm256_div_ps(a.lo, b.lo), _mm256_div_ps(a.hi, b.hi)};
}
inline F32x16 fmadd(F32x16 a, F32x16 b, F32x16 c) {  // a*b + c
  return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}
inline F32x16 fnmadd(F32x16 a, F32x16 b, F32x16 c) {  // c - a*b
  return {_mm256_fnmadd_ps(a.lo, b.lo, c.lo), _mm256_fnmadd_ps(a.hi, b.hi, c.hi)};
}
inline F32x16 max(F32x16 a, F32x16 b) {
  return {_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)};
}  // b on NaN
inline F32x16 min(F32x16 a, F32x16 b) {
  return {_mm256_min_ps(a.lo, b.lo), _mm256_min_ps(a.hi, b.hi)};
}
inline F32x16 sqrt(F32x16 a) {
  return detail::both(a, [](__m256 x) { return _mm256_sqrt_ps(x); });
}
inline F32x16 round(F32x16 a) {
  return detail::both(a, [](__m256 x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); });
}
inline F32x16 scale_pow2(F32x16 p, F32x16 n) {
  return {detail::scale_pow2(p.lo, n.lo), detail::scale_pow2(p.hi, n.hi)};
}
inline float reduce_add(F32x16 a) {
  const __m256 s = _mm256_add_ps(a.lo, a.hi);  // lanes i and i + 8, as the AVX-512 reduction
  return detail::hsum(_mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1)));
}
inline float reduce_max(F32x16 a) {
  const __m256 s = _mm256_max_ps(a.lo, a.hi);
  __m128 v = _mm_max_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  v = _mm_max_ps(v, _mm_movehl_ps(v, v));
  v = _mm_max_ss(v, _mm_movehdup_ps(v));
  return _mm_cvtss_f32(v);
}

inline F32x16 gather(const float* base, int64_t stride, int n) {
  const __m256i s = _mm256_set1_epi32(static_cast<int>(stride));
  const __m256i i0 = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), s);
  const __m256i i1 = _mm256_mullo_epi32(_mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15), s);
  const Mask16 m = lanes(n);
  return {_mm256_mask_i32gather_ps(_mm256_setzero_ps(), base, i0, _mm256_castsi256_ps(m.lo), 4),
          _mm256_mask_i32gather_ps(_mm256_setzero_ps(), base, i1, _mm256_castsi256_ps(m.hi), 4)};
}

inline __m256i to_bf16_bits(F32x16 x) {
  // packus works per 128-bit lane: (lo 0-3, hi 0-3, lo 4-7, hi 4-7); the permute restores order.
  const __m256i packed = _mm256_packus_epi32(detail::to_bf16_u32(x.lo), detail::to_bf16_u32(x.hi));
  return _mm256_permute4x64_epi64(packed, 0xd8);
}
inline F32x16 load_bf16(const uint16_t* p, int w = kLanes) {
  alignas(32) uint16_t tmp[kLanes] = {};
  if (w != kLanes) {
    std::memcpy(tmp, p, sizeof(uint16_t) * static_cast<size_t>(w));
    p = tmp;
  }
  const __m256i lo = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256i hi = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)));
  return {_mm256_castsi256_ps(_mm256_slli_epi32(lo, 16)), _mm256_castsi256_ps(_mm256_slli_epi32(hi, 16))};
}
inline F32x16 round_f16(F32x16 x) {  // F16C
  return detail::both(
      x, [](__m256 v) { return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)); });
}

// Reductions in double: 4 accumulators of 4 doubles.
inline double sum_squares_f64(const float* x, int64_t n) {
  __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
  for (int64_t i = 0; i < n; i += kLanes) {
    const F32x16 v = load(x + i, width(n - i));
    const __m128 q[4] = {_mm256_castps256_ps128(v.lo), _mm256_extractf128_ps(v.lo, 1), _mm256_castps256_ps128(v.hi),
                         _mm256_extractf128_ps(v.hi, 1)};
    for (int j = 0; j < 4; ++j) {
      const __m256d d = _mm256_cvtps_pd(q[j]);
      acc[j] = _mm256_fmadd_pd(d, d, acc[j]);
    }
  }
  return detail::hsum(_mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3])));
}
inline double dot3_f64(const float* a, const float* b, const float* c, int64_t n) {
  __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
  auto quarter = [](const F32x16& v, int j) {
    const __m256 h = j < 2 ? v.lo : v.hi;
    return _mm256_cvtps_pd(j % 2 == 0 ? _mm256_castps256_ps128(h) : _mm256_extractf128_ps(h, 1));
  };
  for (int64_t i = 0; i < n; i += kLanes) {
    const int w = width(n - i);
    const F32x16 x = load(a + i, w), y = load(b + i, w), z = load(c + i, w);
    for (int j = 0; j < 4; ++j)
      acc[j] = _mm256_fmadd_pd(_mm256_mul_pd(quarter(x, j), quarter(y, j)), quarter(z, j), acc[j]);
  }
  return detail::hsum(_mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3])));
}

#else  // portable fallback: the same operations lane by lane
#define FT_SIMD_ISA "scalar"

struct F32x16 {
  float v[kLanes];
};
struct Mask16 {
  bool on[kLanes];
};

template <typename F>
inline F32x16 map(F32x16 a, F f) {
  for (int i = 0; i < kLanes; ++i) a.v[i] = f(a.v[i]);
  return a;
}
template <typename F>
inline F32x16 zip(F32x16 a, F32x16 b, F f) {
  for (int i = 0; i < kLanes; ++i) a.v[i] = f(a.v[i], b.v[i]);
  return a;
}

inline Mask16 lanes(int64_t n) {
  Mask16 m;
  for (int i = 0; i < kLanes; ++i) m.on[i] = i < n;
  return m;
}
inline Mask16 lanes_from(int64_t k) {
  Mask16 m;
  for (int i = 0; i < kLanes; ++i) m.on[i] = i >= k;
  return m;
}
inline F32x16 load(const float* p, int w = kLanes) {
  F32x16 r{};
  for (int i = 0; i < w; ++i) r.v[i] = p[i];
  return r;
}
inline F32x16 load(const float* p, Mask16 m) {
  F32x16 r{};
  for (int i = 0; i < kLanes; ++i)
    if (m.on[i]) r.v[i] = p[i];
  return r;
}
inline void store(float* p, F32x16 x, int w = kLanes) {
  for (int i = 0; i < w; ++i) p[i] = x.v[i];
}
inline void store(float* p, F32x16 x, Mask16 m) {
  for (int i = 0; i < kLanes; ++i)
    if (m.on[i]) p[i] = x.v[i];
}
inline F32x16 select(Mask16 m, F32x16 a, F32x16 b) {
  for (int i = 0; i < kLanes; ++i)
    if (m.on[i]) b.v[i] = a.v[i];
  return b;
}
inline F32x16 set1(float a) {
  F32x16 r;
  for (float& x : r.v) x = a;
  return r;
}
inline F32x16 zero() {
  return set1(0.0f);
}
inline F32x16 operator+(F32x16 a, F32x16 b) {
  return zip(a, b, [](float x, float y) { return x + y; });
}
inline F32x16 operator-(F32x16 a, F32x16 b) {
  return zip(a, b, [](float x, float y) { return x - y; });
}
inline F32x16 operator*(F32x16 a, F32x16 b) {
  return zip(a, b, [](float x, float y) { return x * y; });
}
inline F32x16 operator/(F32x16 a, F32x16 b) {
  return zip(a, b, [](float x, float y) { return x / y; });
}
inline F32x16 fmadd(F32x16 a, F32x16 b, F32x16 c) {
  for (int i = 0; i < kLanes; ++i) c.v[i] = std::fma(a.v[i], b.v[i], c.v[i]);
  return c;
}
inline F32x16 fnmadd(F32x16 a, F32x16 b, F32x16 c) {
  for (int i = 0; i < kLanes; ++i) c.v[i] = std::fma(-a.v[i], b.v[i], c.v[i]);
  return c;
}
inline F32x16 max(F32x16 a, F32x16 b) {
  return zip(a, b, [](float x, float y) { return x > y ? x : y; });
}
inline F32x16 min(F32x16 a, F32x16 b) {
  return zip(a, b, [](float x, float y) { return x < y ? x : y; });
}
inline F32x16 sqrt(F32x16 a) {
  return map(a, [](float x) { return std::sqrt(x); });
}
inline F32x16 round(F32x16 a) {
  return map(a, [](float x) { return std::nearbyint(x); });
}
inline F32x16 scale_pow2(F32x16 p, F32x16 n) {
  for (int i = 0; i < kLanes; ++i) p.v[i] = std::isnan(n.v[i]) ? n.v[i] : std::ldexp(p.v[i], static_cast<int>(n.v[i]));
  return p;
}
inline float reduce_add(F32x16 a) {
  float s = 0;
  for (float x : a.v) s += x;
  return s;
}
inline float reduce_max(F32x16 a) {
  float m = a.v[0];
  for (float x : a.v) m = x > m ? x : m;
  return m;
}
inline F32x16 gather(const float* base, int64_t stride, int n) {
  F32x16 r{};
  for (int i = 0; i < n && i < kLanes; ++i) r.v[i] = base[i * stride];
  return r;
}
inline void store_bf16(uint16_t* p, F32x16 x, int w = kLanes) {
  for (int i = 0; i < w; ++i) p[i] = f32_to_bf16(x.v[i]);
}
inline F32x16 load_bf16(const uint16_t* p, int w = kLanes) {
  F32x16 r{};
  for (int i = 0; i < w; ++i) r.v[i] = bf16_to_f32(p[i]);
  return r;
}
inline F32x16 round_f16(F32x16 x) {
  return map(x, [](float a) { return f16_to_f32(f32_to_f16(a)); });
}
inline double sum_squares_f64(const float* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}
inline double dot3_f64(const float* a, const float* b, const float* c, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i] * c[i];
  return s;
}

#endif

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
// Rounds to bf16 (nearest even) and stores w lanes: the 16 bf16 of to_bf16_bits (one __m256i on
// either ISA), through a buffer for a tail.
inline void store_bf16(uint16_t* p, F32x16 x, int w = kLanes) {
  const __m256i h = to_bf16_bits(x);
  if (w == kLanes) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), h);
  } else {
    alignas(32) uint16_t tmp[kLanes];
    _mm256_store_si256(reinterpret_cast<__m256i*>(tmp), h);
    std::memcpy(p, tmp, sizeof(uint16_t) * static_cast<size_t>(w));
  }
}
#endif

// ---- built from the operations above, the same on every ISA ---------------------------------

// Lanes >= w set to -inf (so a masked tail does not win a max).
inline F32x16 pad_neg_inf(F32x16 a, int w) {
  return w == kLanes ? a : select(lanes(w), a, set1(-INFINITY));
}

// e^x: x = n ln2 + r with |r| <= ln2/2 (ln2 split in two so n ln2 is exact enough), e^r by its
// Taylor polynomial to degree 7 (truncation error < 1e-8 relative), then scaled by 2^n.
inline F32x16 exp(F32x16 x) {
  const F32x16 v = min(set1(89.0f), max(set1(-104.0f), x));  // NaN passes through both
  const F32x16 n = round(v * set1(1.44269504088896341f));
  F32x16 r = fnmadd(n, set1(0.693145751953125f), v);  // ln2 high part
  r = fnmadd(n, set1(1.428606765330187045e-06f), r);  // ln2 low part
  F32x16 p = set1(1.0f / 5040.0f);
  p = fmadd(p, r, set1(1.0f / 720.0f));
  p = fmadd(p, r, set1(1.0f / 120.0f));
  p = fmadd(p, r, set1(1.0f / 24.0f));
  p = fmadd(p, r, set1(1.0f / 6.0f));
  p = fmadd(p, r, set1(0.5f));
  p = fmadd(p, r, set1(1.0f));
  p = fmadd(p, r, set1(1.0f));
  return scale_pow2(p, n);  // p * 2^n; over/underflows to inf/0 like exp
}

// store() into a bf16 buffer rounds to nearest even: a kernel templated on its output type
// writes fp32 or bf16 (a bf16 GEMM's operand) with the same code.
inline void store(uint16_t* p, F32x16 x, int w = kLanes) {
  store_bf16(p, x, w);
}
// load_any() widens fp32 or bf16 data, for kernels templated on their input type too.
inline F32x16 load_any(const float* p, int w = kLanes) {
  return load(p, w);
}
inline F32x16 load_any(const uint16_t* p, int w = kLanes) {
  return load_bf16(p, w);
}

}  // namespace ft::cpu::simd

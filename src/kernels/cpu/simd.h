// A 16-lane fp32 vector for the CPU kernels: AVX-512 when the build targets it, a plain array
// the compiler vectorises otherwise (FT_ARCH=x86-64-v3). Kernels are written once against it.
//
//   using namespace ft::cpu::simd;
//   for (int64_t i = 0; i < n; i += kLanes) {
//     int w = width(n - i);                       // 16, or fewer in the tail
//     F32x16 x = load(p + i, w);                  // lanes >= w read as 0
//     store(q + i, fmadd(x, set1(2.0f), load(q + i, w)), w);
//   }
//
// exp() is accurate to about 1 ulp on [-87, 88] (Cody-Waite reduction + degree-7 polynomial),
// returns 0 below, +inf above and NaN for NaN. sum_squares_f64 / dot3_f64 reduce in double.
#pragma once

#include <cmath>
#include <cstdint>

#include "tensor/dtype.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace ft::cpu::simd {

constexpr int kLanes = 16;

// Number of valid lanes in a block that starts `remaining` elements before the end.
inline int width(int64_t remaining) { return remaining >= kLanes ? kLanes : static_cast<int>(remaining); }

#if defined(__AVX512F__)

struct F32x16 {
  __m512 v;
};

inline __mmask16 lane_mask(int w) { return static_cast<__mmask16>((1u << w) - 1u); }

inline F32x16 load(const float* p, int w = kLanes) {
  return {w == kLanes ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(lane_mask(w), p)};
}
inline void store(float* p, F32x16 x, int w = kLanes) {
  if (w == kLanes) {
    _mm512_storeu_ps(p, x.v);
  } else {
    _mm512_mask_storeu_ps(p, lane_mask(w), x.v);
  }
}
inline F32x16 set1(float a) { return {_mm512_set1_ps(a)}; }
inline F32x16 zero() { return {_mm512_setzero_ps()}; }
inline F32x16 operator+(F32x16 a, F32x16 b) { return {_mm512_add_ps(a.v, b.v)}; }
inline F32x16 operator-(F32x16 a, F32x16 b) { return {_mm512_sub_ps(a.v, b.v)}; }
inline F32x16 operator*(F32x16 a, F32x16 b) { return {_mm512_mul_ps(a.v, b.v)}; }
inline F32x16 operator/(F32x16 a, F32x16 b) { return {_mm512_div_ps(a.v, b.v)}; }
inline F32x16 fmadd(F32x16 a, F32x16 b, F32x16 c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }   // a*b + c
inline F32x16 fnmadd(F32x16 a, F32x16 b, F32x16 c) { return {_mm512_fnmadd_ps(a.v, b.v, c.v)}; } // c - a*b
inline F32x16 max(F32x16 a, F32x16 b) { return {_mm512_max_ps(a.v, b.v)}; }  // b when either is NaN
inline F32x16 min(F32x16 a, F32x16 b) { return {_mm512_min_ps(a.v, b.v)}; }
inline F32x16 sqrt(F32x16 a) { return {_mm512_sqrt_ps(a.v)}; }
inline float reduce_add(F32x16 a) { return _mm512_reduce_add_ps(a.v); }
inline float reduce_max(F32x16 a) { return _mm512_reduce_max_ps(a.v); }
// Rounds to bf16 (nearest even) and stores w lanes.
inline void store_bf16(uint16_t* p, F32x16 x, int w = kLanes) {
#if defined(__AVX512BF16__)
  __m256i h = (__m256i)_mm512_cvtneps_pbh(x.v);
  _mm256_mask_storeu_epi16(p, lane_mask(w), h);
#else
  alignas(64) float tmp[kLanes];
  _mm512_store_ps(tmp, x.v);
  for (int i = 0; i < w; ++i) p[i] = f32_to_bf16(tmp[i]);
#endif
}
// Lanes >= w set to -inf (so a masked tail does not win a max).
inline F32x16 pad_neg_inf(F32x16 a, int w) {
  return w == kLanes ? a : F32x16{_mm512_mask_blend_ps(lane_mask(w), _mm512_set1_ps(-INFINITY), a.v)};
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

// e^x: x = n ln2 + r with |r| <= ln2/2 (ln2 split in two so n ln2 is exact enough), e^r by its
// Taylor polynomial to degree 7 (truncation error < 1e-8 relative), then scaled by 2^n.
inline F32x16 exp(F32x16 x) {
  const __m512 lo = _mm512_set1_ps(-104.0f), hi = _mm512_set1_ps(89.0f);
  __m512 v = _mm512_min_ps(hi, _mm512_max_ps(lo, x.v));  // NaN passes through both
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(v, _mm512_set1_ps(1.44269504088896341f)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), v);   // ln2 high part
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);   // ln2 low part
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return {_mm512_scalef_ps(p, n)};  // p * 2^n; over/underflows to inf/0 like exp
}

#else  // portable fallback: the same operations lane by lane

struct F32x16 {
  float v[kLanes];
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

inline F32x16 load(const float* p, int w = kLanes) {
  F32x16 r{};
  for (int i = 0; i < w; ++i) r.v[i] = p[i];
  return r;
}
inline void store(float* p, F32x16 x, int w = kLanes) {
  for (int i = 0; i < w; ++i) p[i] = x.v[i];
}
inline F32x16 set1(float a) {
  F32x16 r;
  for (float& x : r.v) x = a;
  return r;
}
inline F32x16 zero() { return set1(0.0f); }
inline F32x16 operator+(F32x16 a, F32x16 b) { return zip(a, b, [](float x, float y) { return x + y; }); }
inline F32x16 operator-(F32x16 a, F32x16 b) { return zip(a, b, [](float x, float y) { return x - y; }); }
inline F32x16 operator*(F32x16 a, F32x16 b) { return zip(a, b, [](float x, float y) { return x * y; }); }
inline F32x16 operator/(F32x16 a, F32x16 b) { return zip(a, b, [](float x, float y) { return x / y; }); }
inline F32x16 fmadd(F32x16 a, F32x16 b, F32x16 c) {
  for (int i = 0; i < kLanes; ++i) c.v[i] = std::fma(a.v[i], b.v[i], c.v[i]);
  return c;
}
inline F32x16 fnmadd(F32x16 a, F32x16 b, F32x16 c) {
  for (int i = 0; i < kLanes; ++i) c.v[i] = std::fma(-a.v[i], b.v[i], c.v[i]);
  return c;
}
inline F32x16 max(F32x16 a, F32x16 b) { return zip(a, b, [](float x, float y) { return x > y ? x : y; }); }
inline F32x16 min(F32x16 a, F32x16 b) { return zip(a, b, [](float x, float y) { return x < y ? x : y; }); }
inline F32x16 sqrt(F32x16 a) { return map(a, [](float x) { return std::sqrt(x); }); }
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
inline void store_bf16(uint16_t* p, F32x16 x, int w = kLanes) {
  for (int i = 0; i < w; ++i) p[i] = f32_to_bf16(x.v[i]);
}
inline F32x16 pad_neg_inf(F32x16 a, int w) {
  for (int i = w; i < kLanes; ++i) a.v[i] = -INFINITY;
  return a;
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
inline F32x16 exp(F32x16 x) { return map(x, [](float a) { return std::exp(a); }); }

#endif

// store() into a bf16 buffer rounds to nearest even: a kernel templated on its output type
// writes fp32 or bf16 (a bf16 GEMM's operand) with the same code.
inline void store(uint16_t* p, F32x16 x, int w = kLanes) { store_bf16(p, x, w); }


}  // namespace ft::cpu::simd

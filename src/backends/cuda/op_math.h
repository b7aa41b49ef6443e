// Per-element and per-row math of the CUDA ops, as FT_HD functions: the kernels call them on the
// device, and tests/cuda/cuda_math_test.cpp calls the same code on the CPU against ft::ref
// (kernels/ref/) and tensor/dtype.h. Each function names the reference formula it mirrors.
//
//   uint16_t h = ft::cuda::math::to_bf16(x);          // the bits ft::f32_to_bf16(x) gives
//   float y = ft::cuda::math::swiglu(gate, up);        // silu(gate) * up
//   math::adamw_update(p, m, v, g, math::adamw_scalars(lr, b1, b2, eps, wd, step, scale));
#pragma once

#include <math.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "backends/cuda/hd.h"
#include "kernels/adamw_scalars.h"

namespace ft::cuda::math {

// ---- bit patterns and reduced precision ---------------------------------------------------

FT_HD inline uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

FT_HD inline float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// Round to nearest even; NaN stays a quiet NaN (ft::f32_to_bf16).
FT_HD inline uint16_t to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

FT_HD inline float from_bf16(uint16_t h) {
  return bits_float(static_cast<uint32_t>(h) << 16);
}

// IEEE half, round to nearest even, overflow to Inf, NaN quiet (ft::f32_to_f16). Subnormal
// halves are rounded with integer arithmetic (the reference uses nearbyint in the default
// rounding mode, which is the same rounding).
FT_HD inline uint16_t to_f16(float f) {
  const uint32_t x = float_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u)  // Inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520
  if (absx < 0x38800000u) {  // below 2^-14: a subnormal half or zero, in units of 2^-24
    if (absx < 0x33000000u) return static_cast<uint16_t>(sign);  // below 2^-25: rounds to 0
    const uint32_t e = absx >> 23;                               // 102..112
    const uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - e;  // value = mant >> shift units
    uint32_t m = mant >> shift;
    const uint32_t rest = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (m & 1u))) ++m;  // 0x400 rolls into the smallest normal
    return static_cast<uint16_t>(sign | m);
  }
  const uint32_t exp = (absx >> 23) - 127u + 15u;
  const uint32_t mant = absx & 0x7fffffu;
  uint32_t h = (exp << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

FT_HD inline float from_f16(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    const float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp - 15u + 127u) << 23) | (mant << 13));
}

// ---- SwiGLU (ref_impl::silu, swiglu_forward, swiglu_backward) -----------------------------

FT_HD inline float silu(float g) {
  return g / (1.0f + expf(-g));
}

// out = silu(gate) · up
FT_HD inline float swiglu(float gate, float up) {
  return silu(gate) * up;
}

// silu'(g) = s (1 + g (1 − s)), s = sigmoid(g):  dgate = dy u silu'(g),  dup = dy silu(g).
FT_HD inline void swiglu_grad(float gate, float up, float dy, float* dgate, float* dup) {
  const float s = 1.0f / (1.0f + expf(-gate));
  *dgate = dy * up * s * (1.0f + gate * (1.0f - s));
  *dup = dy * gate * s;
}

// ---- RoPE (ref_impl::rope_tables, rope_apply) ---------------------------------------------

// angle(p, i) = p · theta^(−2i/D), in double like the reference.
FT_HD inline double rope_angle(int64_t pos, int64_t i, int64_t D, double theta) {
  return static_cast<double>(pos) * pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(D));
}

// Rotate-half pair (a, b) = (x_i, x_{i+D/2}) → (a cos − sign b sin, b cos + sign a sin);
// sign = +1 forward, −1 the inverse rotation (backward).
FT_HD inline void rope_rotate(float* a, float* b, float c, float s, float sign) {
  const float x = *a, y = *b;
  *a = x * c - sign * y * s;
  *b = y * c + sign * x * s;
}

// ---- RMSNorm row math (ref_impl::rmsnorm_forward, rmsnorm_backward) -----------------------

// rstd = 1 / sqrt(Σx² / C + eps), from the row's sum of squares in double.
FT_HD inline float rms_rstd(double sum_squares, int64_t C, float eps) {
  return static_cast<float>(1.0 / sqrt(sum_squares / static_cast<double>(C) + static_cast<double>(eps)));
}

FT_HD inline float rms_out(float x, float rstd, float w) {
  return x * rstd * w;
}

// dx_c = r dy_c w_c − x_c r³ / C · Σ_k dy_k w_k x_k  (dot = that sum, in double)
FT_HD inline float rms_dx(float dy, float x, float w, float rstd, double dot, int64_t C) {
  const double r = rstd;
  return static_cast<float>(r * dy * w - x * r * r * r * dot / static_cast<double>(C));
}

// One row's term of dweight_c: dy_c x_c r.
FT_HD inline double rms_dweight_term(float dy, float x, float rstd) {
  return static_cast<double>(dy) * x * static_cast<double>(rstd);
}

// ---- softmax cross-entropy row math (ref_impl::xent_forward, xent_backward) ---------------

// One term of a row's Σ exp(z − max), and the row's lse = max + log Σ, in double like the reference.
FT_HD inline double xent_term(float z, float max) {
  return exp(static_cast<double>(z) - static_cast<double>(max));
}
FT_HD inline double xent_lse(float max, double sum) {
  return static_cast<double>(max) + log(sum);
}

// loss = lse − z[target] for a target in [0, V), else 0.
FT_HD inline float xent_loss(double lse, const float* row, int32_t target, int64_t V) {
  return (target >= 0 && target < V) ? static_cast<float>(lse - static_cast<double>(row[target])) : 0.0f;
}

// dz_j = scale (exp(z_j − lse) − [j == target]); 0 for an ignored row (target < 0). A target >= V
// belongs to another vocabulary shard: only the one-hot term is dropped.
FT_HD inline float xent_grad(float z, float lse, int64_t j, int32_t target, float scale) {
  if (target < 0) return 0.0f;
  float g = static_cast<float>(exp(static_cast<double>(z) - static_cast<double>(lse)));
  if (j == target) g -= 1.0f;
  return g * scale;
}

// ---- vocab-parallel cross-entropy rows (ref::xent_shard_targets, xent_combine_*, ...) -------

// The rank's local target of a global target: t − v0 for t >= v0, V ("another shard's") for
// 0 <= t < v0, −1 for t < 0 (no loss).
FT_HD inline int32_t xent_shard_target(int32_t t, int64_t v0, int64_t V) {
  return t < 0 ? -1 : static_cast<int32_t>(t < v0 ? V : t - v0);
}

// A rank's term of Σ exp(lse − row_max), in double.
FT_HD inline double xent_combine_term(float lse, double row_max) {
  return exp(static_cast<double>(lse) - row_max);
}

// The row's lse over every rank: row_max + log Σ, rounded to float.
FT_HD inline float xent_combined_lse(double row_max, double sum) {
  return static_cast<float>(row_max + log(sum));
}

// loss = lse − target_logit; 0 where the target is ignored (< 0).
FT_HD inline float xent_row_loss(float lse, float target_logit, int32_t target) {
  return target < 0 ? 0.0f : lse - target_logit;
}

// ---- PowerSGD (ref::gram_schmidt) -------------------------------------------------------------

// A column's scale after Gram–Schmidt: 1 / (sqrt(Σ p²) + 1e-8), from the sum in double.
FT_HD inline float gram_schmidt_inverse_norm(double sum_squares) {
  return static_cast<float>(1.0 / (sqrt(sum_squares) + 1e-8));
}

// ---- AdamW (ref::adamw_step; PyTorch's torch.optim.AdamW) ---------------------------------

// What one element's update needs: the step's values (AdamwStepScalars, computed on the host
// in double and read from device memory by the kernel) with the run's constants; decay as the
// CPU op computes it, 1 − lr · weight_decay in float.
struct AdamwScalars {
  float step_size;  // lr / (1 − b1^step)
  float bc2_sqrt;   // sqrt(1 − b2^step)
  float decay;      // 1 − lr · weight_decay
  float beta1, beta2, one_minus_beta1, one_minus_beta2, eps, grad_scale;
};

FT_HD inline AdamwScalars adamw_scalars(const AdamwStepScalars& step, float beta1, float beta2, float eps,
                                        float weight_decay) {
  return {step.step_size, step.bc2_sqrt, 1.0f - step.lr * weight_decay, beta1, beta2, 1.0f - beta1, 1.0f - beta2, eps,
          step.grad_scale};
}

// g = grad · grad_scale; m = b1 m + (1 − b1) g; v = b2 v + (1 − b2) g²;
// p = p (1 − lr wd) − step_size m / (sqrt(v) / sqrt(bc2) + eps)
FT_HD inline void adamw_update(float* p, float* m, float* v, float grad, const AdamwScalars& s) {
  const float g = grad * s.grad_scale;
  const float mi = s.beta1 * *m + s.one_minus_beta1 * g;
  const float vi = s.beta2 * *v + s.one_minus_beta2 * g * g;
  const float denom = sqrtf(vi) / s.bc2_sqrt + s.eps;
  *p = *p * s.decay - s.step_size * mi / denom;
  *m = mi;
  *v = vi;
}

// ---- attention ----------------------------------------------------------------------------

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Scores are kept in the log2 domain (scaled by log2 e / sqrt(D)), as in backends/cpu/attention.cpp.
FT_HD inline float attention_scale_log2(int64_t D) {
  return static_cast<float>(1.0 / sqrt(static_cast<double>(D))) * kLog2e;
}

// lse (natural log) from the running max m and sum l of exp2(s − m) in the log2 domain.
FT_HD inline float attention_lse(float m, float l) {
  return (m + log2f(l)) * kLn2;
}

}  // namespace ft::cuda::math

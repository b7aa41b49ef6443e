// The CUDA kernels' per-element and per-row math (backends/cuda/op_math.h), run on the CPU against
// the reference ops (ft::ref) and tensor/dtype.h's conversions. Where the host build of a function
// performs the reference's operations in the reference's order the results must be bit-identical;
// the row computations (sums in another order) within rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "backends/cuda/op_math.h"
#include "kernels/ops.h"
#include "tensor/dtype.h"

namespace ft::cuda {
namespace {

std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Every 2^32 / step-th float bit pattern (all exponents, both signs, NaNs and infinities) plus
// the neighbourhoods of the rounding boundaries.
std::vector<uint32_t> float_patterns() {
  std::vector<uint32_t> v;
  for (uint64_t u = 0; u <= 0xffffffffu; u += 4099) v.push_back(static_cast<uint32_t>(u));
  for (uint32_t base : {0x00000000u, 0x00800000u, 0x33000000u, 0x33800000u, 0x38800000u, 0x387fe000u, 0x3f808000u,
                        0x3f818000u, 0x477fe000u, 0x477ff000u, 0x7f7fffffu, 0x7f800000u, 0x7fc00000u})
    for (uint32_t d = 0; d < 512; ++d)
      for (uint32_t sign : {0u, 0x80000000u}) {
        v.push_back((base + d) | sign);
        v.push_back((base - d) | sign);
      }
  return v;
}

bool same_bits_or_both_nan(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return math::float_bits(a) == math::float_bits(b);
}

TEST(CudaMath, Bf16RoundingIsTheReferences) {
  for (uint32_t u : float_patterns()) {
    const float f = math::bits_float(u);
    ASSERT_EQ(math::to_bf16(f), f32_to_bf16(f)) << std::hex << u;
  }
  for (uint32_t h = 0; h <= 0xffff; ++h)
    ASSERT_TRUE(same_bits_or_both_nan(math::from_bf16(static_cast<uint16_t>(h)), bf16_to_f32(static_cast<uint16_t>(h))))
        << std::hex << h;
}

TEST(CudaMath, F16RoundingIsTheReferences) {
  // Integer rounding of subnormal halves (the reference uses nearbyint): every pattern checked.
  for (uint32_t u : float_patterns()) {
    const float f = math::bits_float(u);
    ASSERT_EQ(math::to_f16(f), f32_to_f16(f)) << std::hex << u;
  }
  // Every float below the smallest normal half, exhaustively (2^-14 and under, both signs).
  for (uint32_t u = 0; u < 0x38800000u; u += 7)
    ASSERT_EQ(math::to_f16(math::bits_float(u | 0x80000000u)), f32_to_f16(math::bits_float(u | 0x80000000u)))
        << std::hex << u;
  for (uint32_t h = 0; h <= 0xffff; ++h)
    ASSERT_TRUE(same_bits_or_both_nan(math::from_f16(static_cast<uint16_t>(h)), f16_to_f32(static_cast<uint16_t>(h))))
        << std::hex << h;
}

TEST(CudaMath, SwigluIsTheReferences) {
  const int64_t N = 7, F = 301;
  auto gu = random_floats(N * 2 * F, 1, -12.0f, 12.0f);
  gu[0] = -1e30f;  // silu(-1e30) = -0, times a huge up value stays 0 (not NaN)
  gu[F] = 1e30f;
  gu[1] = 200.0f;
  gu[2] = -200.0f;
  auto dout = random_floats(N * F, 2);
  std::vector<float> out(N * F), dgu(N * 2 * F);
  ref::swiglu_forward(cpu_context(), out.data(), gu.data(), N, F);
  ref::swiglu_backward(cpu_context(), dgu.data(), dout.data(), gu.data(), N, F);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t f = 0; f < F; ++f) {
      const float g = gu[n * 2 * F + f], u = gu[n * 2 * F + F + f];
      ASSERT_TRUE(same_bits_or_both_nan(math::swiglu(g, u), out[n * F + f])) << n << " " << f;
      float dg, du;
      math::swiglu_grad(g, u, dout[n * F + f], &dg, &du);
      ASSERT_TRUE(same_bits_or_both_nan(dg, dgu[n * 2 * F + f])) << n << " " << f;
      ASSERT_TRUE(same_bits_or_both_nan(du, dgu[n * 2 * F + F + f])) << n << " " << f;
    }
  EXPECT_FALSE(std::isnan(math::swiglu(-1e30f, 1e30f)));
}

TEST(CudaMath, RopeIsTheReferences) {
  const int64_t B = 2, T = 5, H = 4, Hkv = 2, D = 34, pos0 = 3, max_pos = pos0 + T, half = D / 2;
  std::vector<float> cos(max_pos * half), sin(max_pos * half);
  ref::rope_tables(cpu_context(), cos.data(), sin.data(), max_pos, D, 10000.0f);
  for (int64_t p = 0; p < max_pos; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double a = math::rope_angle(p, i, D, 10000.0);
      ASSERT_EQ(static_cast<float>(std::cos(a)), cos[p * half + i]);
      ASSERT_EQ(static_cast<float>(std::sin(a)), sin[p * half + i]);
    }
  const int64_t row = (H + 2 * Hkv) * D;
  for (float sign : {1.0f, -1.0f}) {
    auto qkv = random_floats(B * T * row, 3), want = qkv;
    if (sign > 0)
      ref::rope_forward(cpu_context(), want.data(), cos.data(), sin.data(), B, T, H, Hkv, D, pos0);
    else
      ref::rope_backward(cpu_context(), want.data(), cos.data(), sin.data(), B, T, H, Hkv, D, pos0);
    // The kernel's map: one pair (i, i + D/2) of a query or key head at a time.
    for (int64_t bt = 0; bt < B * T; ++bt)
      for (int64_t h = 0; h < H + Hkv; ++h)
        for (int64_t i = 0; i < half; ++i) {
          float* x = qkv.data() + bt * row + h * D;
          const int64_t tab = (pos0 + bt % T) * half + i;
          math::rope_rotate(x + i, x + i + half, cos[tab], sin[tab], sign);
        }
    EXPECT_EQ(qkv, want);  // value heads untouched too
  }
}

// One RMSNorm row as the kernel computes it: Σx² in double, then the per-element functions.
TEST(CudaMath, RmsNormRowMathMatchesTheReference) {
  for (auto [N, C] : std::vector<std::pair<int64_t, int64_t>>{{3, 17}, {5, 1000}}) {
    auto x = random_floats(N * C, 4, -2.0f, 2.0f);
    auto w = random_floats(C, 5, 0.5f, 1.5f);
    auto dout = random_floats(N * C, 6);
    std::vector<float> out(N * C), rstd(N), dx(N * C), dw(C, 0.0f);
    ref::rmsnorm_forward(cpu_context(), out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
    ref::rmsnorm_backward(cpu_context(), dx.data(), dw.data(), dout.data(), nullptr, x.data(), w.data(), rstd.data(), N,
                          C);
    std::vector<double> dw_acc(C, 0.0);
    for (int64_t n = 0; n < N; ++n) {
      double ss = 0, dot = 0;
      for (int64_t c = C - 1; c >= 0; --c) ss += static_cast<double>(x[n * C + c]) * x[n * C + c];  // another order
      const float r = math::rms_rstd(ss, C, 1e-5f);
      EXPECT_NEAR(r, rstd[n], 2e-7 * rstd[n]);
      for (int64_t c = 0; c < C; ++c) {
        EXPECT_NEAR(math::rms_out(x[n * C + c], r, w[c]), out[n * C + c], 1e-6 * std::fabs(out[n * C + c]) + 1e-7);
        dot += static_cast<double>(dout[n * C + c]) * w[c] * x[n * C + c];
      }
      for (int64_t c = 0; c < C; ++c) {
        const float want = dx[n * C + c];
        EXPECT_NEAR(math::rms_dx(dout[n * C + c], x[n * C + c], w[c], rstd[n], dot, C), want,
                    1e-5 * std::fabs(want) + 1e-6);
        dw_acc[c] += math::rms_dweight_term(dout[n * C + c], x[n * C + c], rstd[n]);
      }
    }
    for (int64_t c = 0; c < C; ++c) EXPECT_NEAR(static_cast<float>(dw_acc[c]), dw[c], 1e-5 * std::fabs(dw[c]) + 1e-6);
  }
}

TEST(CudaMath, CrossEntropyRowMathMatchesTheReference) {
  const int64_t N = 6, V = 2049;
  auto logits = random_floats(N * V, 7, -8.0f, 8.0f);
  logits[3] = 1000.0f;  // a huge logit: max subtraction keeps exp finite
  std::vector<int32_t> targets = {5, -1, static_cast<int32_t>(V + 3), 2048, -5, 0};
  std::vector<float> loss(N), lse(N), dl(N * V);
  ref::xent_forward(cpu_context(), loss.data(), lse.data(), logits.data(), targets.data(), N, V);
  ref::xent_backward(cpu_context(), dl.data(), logits.data(), lse.data(), targets.data(), N, V, 0.37f);
  for (int64_t n = 0; n < N; ++n) {
    const float* z = logits.data() + n * V;
    float mx = -INFINITY;
    for (int64_t j = 0; j < V; ++j) mx = std::max(mx, z[j]);
    double sum = 0;
    for (int64_t j = 0; j < V; ++j) sum += math::xent_term(z[j], mx);
    const double l = math::xent_lse(mx, sum);
    EXPECT_NEAR(static_cast<float>(l), lse[n], 1e-6 * std::fabs(lse[n]) + 1e-6);
    EXPECT_NEAR(math::xent_loss(l, z, targets[n], V), loss[n], 1e-5);
    for (int64_t j = 0; j < V; ++j)  // from the same lse: the same operations, the same bits
      ASSERT_EQ(math::xent_grad(z[j], lse[n], j, targets[n], 0.37f), dl[n * V + j]) << n << " " << j;
  }
}

TEST(CudaMath, AdamwMatchesTheReferenceOverSteps) {
  const int64_t n = 1001;
  auto p = random_floats(n, 8), p_ref = p;
  auto m = random_floats(n, 9, -0.01f, 0.01f), m_ref = m;
  auto v = random_floats(n, 10, 1e-6f, 1e-4f), v_ref = v;
  std::vector<uint16_t> pb_ref(n);
  for (int64_t step = 1; step <= 3; ++step) {
    auto g = random_floats(n, 20 + step);
    const AdamwStepScalars st = adamw_step_scalars(3e-3f, 0.9f, 0.95f, step, 0.5f);
    ref::adamw_step(cpu_context(), p_ref.data(), m_ref.data(), v_ref.data(), pb_ref.data(), g.data(), n, &st, 0.9f,
                    0.95f, 1e-8f, 0.1f);
    const math::AdamwScalars s = math::adamw_scalars(st, 0.9f, 0.95f, 1e-8f, 0.1f);
    for (int64_t i = 0; i < n; ++i) math::adamw_update(&p[i], &m[i], &v[i], g[i], s);
  }
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(m[i], m_ref[i], 1e-6 * 0.01) << i;
    ASSERT_NEAR(v[i], v_ref[i], 1e-6 * 1e-4) << i;
    ASSERT_NEAR(p[i], p_ref[i], 1e-6) << i;
    ASSERT_LE(std::abs(int(math::to_bf16(p[i])) - int(pb_ref[i])), 1) << i;
  }
}

// The vocab-parallel cross-entropy's row math (xent_parallel.cu) against the reference ops.
TEST(CudaMath, VocabParallelRowMathIsTheReferences) {
  const std::vector<int32_t> targets = {-7, -1, 0, 3, 99, 100, 101, 163, 164, 5000};
  const int64_t N = static_cast<int64_t>(targets.size()), v0 = 100, V = 64;
  std::vector<int32_t> local(N);
  ref::xent_shard_targets(cpu_context(), local.data(), targets.data(), N, v0, V);
  for (int64_t n = 0; n < N; ++n) EXPECT_EQ(math::xent_shard_target(targets[n], v0, V), local[n]) << targets[n];

  const auto lse = random_floats(N, 31, -3.0f, 9.0f), tl = random_floats(N, 32, -5.0f, 5.0f);
  std::vector<double> row_max(N), sums(2 * N);
  for (int64_t n = 0; n < N; ++n) row_max[n] = lse[n] + 0.75 * (n % 3);  // another rank's max may be larger
  ref::xent_combine_sums(cpu_context(), sums.data(), lse.data(), tl.data(), row_max.data(), N);
  std::vector<float> lse_out(N), tl_out(N), loss(N);
  ref::xent_combine_finish(cpu_context(), lse_out.data(), tl_out.data(), row_max.data(), sums.data(), N);
  ref::xent_loss_from_rows(cpu_context(), loss.data(), lse_out.data(), tl_out.data(), targets.data(), N);
  for (int64_t n = 0; n < N; ++n) {
    EXPECT_NEAR(math::xent_combine_term(lse[n], row_max[n]), sums[n], 1e-15 * sums[n]) << n;
    EXPECT_EQ(math::xent_combined_lse(row_max[n], sums[n]), lse_out[n]) << n;
    EXPECT_EQ(math::xent_row_loss(lse_out[n], tl_out[n], targets[n]), loss[n]) << n;
  }
}

// gram_schmidt (powersgd.cu) as its kernel computes it, sequentially: the reference's columns.
TEST(CudaMath, GramSchmidtIsTheReferences) {
  const int64_t n = 37, r = 4;
  auto P = random_floats(n * r, 41), want = P;
  ref::gram_schmidt(cpu_context(), want.data(), n, r);
  for (int64_t j = 0; j < r; ++j) {
    for (int64_t k = 0; k < j; ++k) {
      double dot = 0;
      for (int64_t i = 0; i < n; ++i) dot += static_cast<double>(P[i * r + j]) * P[i * r + k];
      for (int64_t i = 0; i < n; ++i) P[i * r + j] -= static_cast<float>(dot) * P[i * r + k];
    }
    double norm = 0;
    for (int64_t i = 0; i < n; ++i) norm += static_cast<double>(P[i * r + j]) * P[i * r + j];
    const float inv = math::gram_schmidt_inverse_norm(norm);
    for (int64_t i = 0; i < n; ++i) P[i * r + j] *= inv;
  }
  for (int64_t i = 0; i < n * r; ++i) EXPECT_NEAR(P[i], want[i], 1e-6) << i;
}

// The attention kernels' log2-domain statistics give the natural-log lse.
TEST(CudaMath, AttentionLseFromLog2Statistics) {
  const std::vector<float> s = {0.3f, -1.2f, 2.5f, 0.0f, 1.7f};
  const int64_t D = 64;
  double want_max = -INFINITY;
  for (float x : s) want_max = std::max(want_max, static_cast<double>(x));
  double want = 0;
  for (float x : s) want += std::exp(static_cast<double>(x) / std::sqrt(64.0) - want_max / 8.0);
  want = want_max / 8.0 + std::log(want);
  // kernel: scores scaled into the log2 domain, running max m and sum l of exp2(s − m)
  const float c = math::attention_scale_log2(D);
  float m = -INFINITY, l = 0.0f;
  for (float x : s) {
    const float sl = x * c, m_new = std::max(m, sl);
    l = l * std::exp2(m - m_new) + std::exp2(sl - m_new);
    m = m_new;
  }
  EXPECT_NEAR(math::attention_lse(m, l), want, 1e-6);
}

}  // namespace
}  // namespace ft::cuda

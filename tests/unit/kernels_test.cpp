// The kernels' special cases: the SIMD layer, results that must not depend on the thread count,
// overflow and extreme inputs, the bf16 forms being exactly the fp32 ops rounded, AdamW over
// several steps, cross-entropy in place. Every op against the reference on odd shapes and every
// backward against finite differences: the op harness (tests/ops, kernels_ops_test.cpp).
#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <limits>
#include <ostream>
#include <random>
#include <vector>

#include "backends/cpu/simd.h"
#include "fd_check.h"
#include "kernels/ops.h"
#include "tensor/dtype.h"

namespace ft {
namespace {

using test::all_close;
using test::max_abs;
using test::random_floats;
namespace simd = cpu::simd;
const ExecContext& ctx = cpu_context();

std::vector<int32_t> random_tokens(size_t n, int32_t lo, int32_t hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> d(lo, hi - 1);
  std::vector<int32_t> v(n);
  for (auto& t : v) t = d(rng);
  return v;
}

// ---- simd::exp ----------------------------------------------------------------------------

TEST(Simd, ExpIsAccurateToAFewUlp) {
  double worst = 0;
  float worst_x = 0;
  std::vector<float> xs;
  for (float x = -87.0f; x < 88.0f; x += 0.0137f) xs.push_back(x);
  for (float x : {0.0f, -0.0f, 1e-8f, -1e-8f, 0.5f * 0.6931472f, -0.5f * 0.6931472f}) xs.push_back(x);
  for (size_t i = 0; i < xs.size(); i += simd::kLanes) {
    int w = simd::width(static_cast<int64_t>(xs.size() - i));
    float out[simd::kLanes];
    simd::store(out, simd::exp(simd::load(xs.data() + i, w)), w);
    for (int j = 0; j < w; ++j) {
      double want = std::exp(static_cast<double>(xs[i + j]));
      double rel = std::fabs(out[j] - want) / want;
      if (rel > worst) {
        worst = rel;
        worst_x = xs[i + j];
      }
    }
  }
  EXPECT_LT(worst, 2.5e-7) << "worst relative error at x = " << worst_x;
}

TEST(Simd, ExpLimits) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> in = {-inf, -200.0f, -104.5f, 89.0f,  200.0f, inf,    std::nanf(""), 0.0f,
                           1.0f, -1.0f,   10.0f,   -10.0f, 88.0f,  -87.0f, 2.0f,          3.0f};
  float out[simd::kLanes];
  simd::store(out, simd::exp(simd::load(in.data())));
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[3], inf);
  EXPECT_EQ(out[4], inf);
  EXPECT_EQ(out[5], inf);
  EXPECT_TRUE(std::isnan(out[6]));
  EXPECT_EQ(out[7], 1.0f);
  for (int i = 8; i < simd::kLanes; ++i) EXPECT_NEAR(out[i] / std::exp(static_cast<double>(in[i])), 1.0, 3e-7) << in[i];
}

// Results below the smallest normal float (x < -87.34): the AVX2 version scales by 2^n in two
// exact steps and rounds once, like AVX-512's scalef — within about one subnormal step of e^x.
TEST(Simd, ExpOfSubnormalResultsRoundsOnce) {
  std::vector<float> xs;
  for (float x = -104.0f; x < -87.0f; x += 0.0173f) xs.push_back(x);
  const double step = std::ldexp(1.0, -149);
  for (size_t i = 0; i < xs.size(); i += simd::kLanes) {
    int w = simd::width(static_cast<int64_t>(xs.size() - i));
    float out[simd::kLanes];
    simd::store(out, simd::exp(simd::load(xs.data() + i, w)), w);
    for (int j = 0; j < w; ++j) {
      double want = std::exp(static_cast<double>(xs[i + j]));
      EXPECT_LE(std::fabs(out[j] - want), 1.5 * step + 2.5e-7 * want) << "x = " << xs[i + j];
    }
  }
}

TEST(Simd, ScalePow2IsExactOverTheExpRange) {
  std::vector<float> ns(simd::kLanes), out(simd::kLanes);
  for (int n0 = -150; n0 <= 128; n0 += simd::kLanes) {
    for (int j = 0; j < simd::kLanes; ++j) ns[j] = static_cast<float>(n0 + j);
    simd::store(out.data(), simd::scale_pow2(simd::set1(1.3125f), simd::load(ns.data())));
    for (int j = 0; j < simd::kLanes; ++j) EXPECT_EQ(out[j], std::ldexp(1.3125f, n0 + j)) << "n = " << n0 + j;
  }
}

// Every width 0..16: masked loads read zeros past the width, masked stores leave the rest alone.
TEST(Simd, MaskedLoadsAndStoresTouchOnlyTheirLanes) {
  std::vector<float> src(2 * simd::kLanes);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) + 1.0f;
  for (int w = 0; w <= simd::kLanes; ++w) {
    float got[simd::kLanes];
    simd::store(got, simd::load(src.data(), w));
    for (int i = 0; i < simd::kLanes; ++i) EXPECT_EQ(got[i], i < w ? src[i] : 0.0f) << "w " << w << " lane " << i;
    simd::store(got, simd::load(src.data(), simd::lanes(w)));
    for (int i = 0; i < simd::kLanes; ++i) EXPECT_EQ(got[i], i < w ? src[i] : 0.0f) << "w " << w << " lane " << i;
    std::vector<float> dst(2 * simd::kLanes, -5.0f), dst2 = dst;
    simd::store(dst.data(), simd::set1(9.0f), w);
    simd::store(dst2.data(), simd::set1(9.0f), simd::lanes(w));
    for (int i = 0; i < 2 * simd::kLanes; ++i) {
      EXPECT_EQ(dst[i], i < w ? 9.0f : -5.0f) << "w " << w << " lane " << i;
      EXPECT_EQ(dst2[i], i < w ? 9.0f : -5.0f) << "w " << w << " lane " << i;
    }
    simd::store(got, simd::select(simd::lanes_from(w), simd::set1(1.0f), simd::set1(2.0f)));
    for (int i = 0; i < simd::kLanes; ++i) EXPECT_EQ(got[i], i >= w ? 1.0f : 2.0f) << "k " << w << " lane " << i;
    simd::store(got, simd::pad_neg_inf(simd::load(src.data()), w));
    for (int i = 0; i < simd::kLanes; ++i) EXPECT_EQ(got[i], i < w ? src[i] : -INFINITY);
  }
  float got[simd::kLanes];
  simd::store(got, simd::gather(src.data() + 1, 2, 11));  // lanes i < 11 read src[1 + 2 i]
  for (int i = 0; i < simd::kLanes; ++i) EXPECT_EQ(got[i], i < 11 ? src[1 + 2 * i] : 0.0f) << i;
}

TEST(Simd, ReductionsMatchDoublePrecisionSums) {
  auto v = random_floats(simd::kLanes, 80, -4.0f, 4.0f);
  v[5] = 7.5f;  // the largest
  double sum = 0;
  for (float x : v) sum += x;
  EXPECT_NEAR(simd::reduce_add(simd::load(v.data())), sum, 1e-5);
  EXPECT_EQ(simd::reduce_max(simd::load(v.data())), 7.5f);
  for (int64_t n : {0, 1, 7, 15, 16, 17, 31, 33, 1000, 1001}) {
    auto a = random_floats(n, 81, -3.0f, 3.0f), b = random_floats(n, 82), c = random_floats(n, 83);
    long double ss = 0, d3 = 0;
    for (int64_t i = 0; i < n; ++i) {
      ss += static_cast<long double>(a[i]) * a[i];
      d3 += static_cast<long double>(a[i]) * b[i] * c[i];
    }
    EXPECT_NEAR(simd::sum_squares_f64(a.data(), n), static_cast<double>(ss), 1e-12 * (1 + static_cast<double>(ss)))
        << n;
    EXPECT_NEAR(simd::dot3_f64(a.data(), b.data(), c.data(), n), static_cast<double>(d3), 1e-12 * (1 + n)) << n;
  }
}

// bf16 and fp16 conversions are the scalar ones (dtype.h) lane for lane, specials included.
TEST(Simd, HalfPrecisionConversionsMatchScalar) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> xs = {0.0f,
                           -0.0f,
                           1.0f,
                           -1.0f,
                           1.00390625f /* a bf16 tie */,
                           1.01171875f /* tie to odd */,
                           3.4e38f,
                           -3.4e38f,
                           inf,
                           -inf,
                           std::nanf(""),
                           65504.0f,
                           65520.0f,
                           1e-7f,
                           6e-8f,
                           2.5e-8f,
                           3.14159265f,
                           -2.71828f,
                           1e20f,
                           -1e-20f,
                           0.1f,
                           123.456f};
  for (size_t i = 0; i < xs.size(); i += simd::kLanes) {
    int w = simd::width(static_cast<int64_t>(xs.size() - i));
    uint16_t h[simd::kLanes + 1];
    h[w] = 0xabcd;  // past the width: untouched
    simd::store_bf16(h, simd::load(xs.data() + i, w), w);
    EXPECT_EQ(h[w], 0xabcd);
    float back[simd::kLanes], r16[simd::kLanes];
    simd::store(back, simd::load_bf16(h, w));
    simd::store(r16, simd::round_f16(simd::load(xs.data() + i, w)));
    for (int j = 0; j < w; ++j) {
      const float x = xs[i + j];
      if (std::isnan(x)) {
        EXPECT_TRUE(std::isnan(bf16_to_f32(h[j])));
        EXPECT_TRUE(std::isnan(back[j]));
        EXPECT_TRUE(std::isnan(r16[j]));
        continue;
      }
      EXPECT_EQ(h[j], f32_to_bf16(x)) << x;
      EXPECT_EQ(back[j], bf16_to_f32(h[j])) << x;
      EXPECT_EQ(r16[j], f16_to_f32(f32_to_f16(x))) << x;
    }
  }
}

// ---- Embedding ----------------------------------------------------------------------------

// Threads split columns, each element sums its tokens in order: the result is bit-identical for
// any thread count.
TEST(Embedding, BackwardDoesNotDependOnThreadCount) {
  const int64_t N = 512, C = 200, V = 9;
  auto tokens = random_tokens(N, 0, V, 15);
  auto dout = random_floats(N * C, 16);
  std::vector<float> d1(V * C, 0.0f), d3(V * C, 0.0f);
  int prev = omp_get_max_threads();
  omp_set_num_threads(1);
  cpu::embedding_backward(ctx, d1.data(), dout.data(), tokens.data(), N, C, 0, V);
  omp_set_num_threads(3);
  cpu::embedding_backward(ctx, d3.data(), dout.data(), tokens.data(), N, C, 0, V);
  omp_set_num_threads(prev);
  EXPECT_EQ(d1, d3);
}

// ---- RMSNorm ------------------------------------------------------------------------------

// Activations of a diverging run (|x| ~ 1e30, x² overflows fp32): the fast op must normalise them
// as the reference does (sums in double), not overflow to rstd = 0 and output zeros.
TEST(RmsNorm, HugeActivationsNormaliseLikeTheReference) {
  const int64_t N = 3, C = 40;
  auto x = random_floats(N * C, 25, -1.0f, 1.0f);
  for (float& v : x) v *= 1e30f;
  auto w = random_floats(C, 26, 0.5f, 1.5f), dout = random_floats(N * C, 27);
  std::vector<float> out(N * C), rstd(N), out_ref(N * C), rstd_ref(N);
  cpu::rmsnorm_forward(ctx, out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
  ref::rmsnorm_forward(ctx, out_ref.data(), rstd_ref.data(), x.data(), w.data(), N, C, 1e-5f);
  EXPECT_TRUE(all_close(rstd, rstd_ref, 2e-6, 0));
  EXPECT_TRUE(all_close(out, out_ref, 2e-6, 1e-6));
  std::vector<float> dx(N * C), dx_ref(N * C), dw(C, 0.0f), dw_ref(C, 0.0f);
  cpu::rmsnorm_backward(ctx, dx.data(), dw.data(), dout.data(), nullptr, x.data(), w.data(), rstd_ref.data(), N, C);
  ref::rmsnorm_backward(ctx, dx_ref.data(), dw_ref.data(), dout.data(), nullptr, x.data(), w.data(), rstd_ref.data(), N,
                        C);
  EXPECT_TRUE(all_close(dx, dx_ref, 1e-5, 1e-6 * max_abs(dx_ref)));
  EXPECT_TRUE(all_close(dw, dw_ref, 1e-5, 1e-6 * max_abs(dw_ref)));
}

// The residual stream's gradient added in the backward's pass is the separate add the model ran
// before, bit for bit — out of place and in place (dx = dresidual).
TEST(RmsNorm, TheResidualAddedInThePassIsTheSeparateAdd) {
  const int64_t N = 37, C = 70;
  auto x = random_floats(N * C, 31, -2.0f, 2.0f), w = random_floats(C, 32, 0.5f, 1.5f);
  auto dout = random_floats(N * C, 33), dres = random_floats(N * C, 34);
  std::vector<float> out(N * C), rstd(N), want(N * C), got(N * C), dw(C, 0.0f), dw2(C, 0.0f), dw3(C, 0.0f);
  cpu::rmsnorm_forward(ctx, out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
  cpu::rmsnorm_backward(ctx, want.data(), dw.data(), dout.data(), nullptr, x.data(), w.data(), rstd.data(), N, C);
  cpu::add_inplace(ctx, want.data(), dres.data(), N * C);
  cpu::rmsnorm_backward(ctx, got.data(), dw2.data(), dout.data(), dres.data(), x.data(), w.data(), rstd.data(), N, C);
  EXPECT_EQ(got, want);
  EXPECT_EQ(dw2, dw);
  auto inplace = dres;
  cpu::rmsnorm_backward(ctx, inplace.data(), dw3.data(), dout.data(), inplace.data(), x.data(), w.data(), rstd.data(),
                        N, C);
  EXPECT_EQ(inplace, want);
  std::vector<float> ref_dx(N * C), ref_dw(C, 0.0f);
  ref::rmsnorm_backward(ctx, ref_dx.data(), ref_dw.data(), dout.data(), dres.data(), x.data(), w.data(), rstd.data(), N,
                        C);
  EXPECT_TRUE(all_close(got, ref_dx, 1e-5, 1e-6 * max_abs(ref_dx)));
}

// ---- SwiGLU -------------------------------------------------------------------------------

TEST(SwiGlu, OverflowingProductsFollowTheReference) {
  // silu(-1e30) = -0: times a huge up value it stays 0 (a fused g u / (1 + e^-g) would give NaN).
  std::vector<float> gu = {-1e30f, 1e30f}, out(1), out_ref(1);
  cpu::swiglu_forward(ctx, out.data(), gu.data(), 1, 1);
  ref::swiglu_forward(ctx, out_ref.data(), gu.data(), 1, 1);
  EXPECT_EQ(out[0], out_ref[0]);
  EXPECT_FALSE(std::isnan(out[0]));
}

TEST(SwiGlu, ExtremeGatesStayFinite) {
  std::vector<float> gu = {-200.0f, 200.0f, -90.0f, 3.0f, 2.0f, -1.0f};  // N = 1, F = 3
  std::vector<float> out(3), out_ref(3), dout = {0.5f, -0.25f, 2.0f}, dgu(6), dgu_ref(6);
  cpu::swiglu_forward(ctx, out.data(), gu.data(), 1, 3);
  ref::swiglu_forward(ctx, out_ref.data(), gu.data(), 1, 3);
  EXPECT_TRUE(all_close(out, out_ref, 1e-6, 1e-30));
  cpu::swiglu_backward(ctx, dgu.data(), dout.data(), gu.data(), 1, 3);
  ref::swiglu_backward(ctx, dgu_ref.data(), dout.data(), gu.data(), 1, 3);
  EXPECT_TRUE(all_close(dgu, dgu_ref, 1e-6, 1e-30));
}

// ---- Cross-entropy ------------------------------------------------------------------------

TEST(Xent, LargeLogitsDoNotOverflow) {
  std::vector<float> logits = {1000.0f, 999.0f, -1000.0f, 998.5f, 0.0f};
  std::vector<int32_t> t = {1};
  float loss, lse, loss_ref, lse_ref;
  cpu::xent_forward(ctx, &loss, &lse, logits.data(), t.data(), 1, 5);
  ref::xent_forward(ctx, &loss_ref, &lse_ref, logits.data(), t.data(), 1, 5);
  EXPECT_FLOAT_EQ(lse, lse_ref);
  EXPECT_NEAR(loss, loss_ref, 1e-4);
  EXPECT_TRUE(std::isfinite(loss));
}

// dlogits may alias logits: in place gives the out-of-place result.
TEST(Xent, BackwardInPlaceEqualsOutOfPlace) {
  const int64_t N = 9, V = 1000;
  auto logits = random_floats(N * V, 51, -8.0f, 8.0f);
  auto targets = random_tokens(N, 0, static_cast<int32_t>(V), 52);
  targets[1] = -1;
  targets[2] = static_cast<int32_t>(V + 2);  // another shard's
  std::vector<float> loss(N), lse(N), dl(N * V);
  cpu::xent_forward(ctx, loss.data(), lse.data(), logits.data(), targets.data(), N, V);
  cpu::xent_backward(ctx, dl.data(), logits.data(), lse.data(), targets.data(), N, V, 0.37f);
  auto inplace = logits;
  cpu::xent_backward(ctx, inplace.data(), inplace.data(), lse.data(), targets.data(), N, V, 0.37f);
  EXPECT_EQ(inplace, dl);
}

// ---- bf16 outputs -------------------------------------------------------------------------

// A bf16-output op is exactly its fp32 op with the output rounded to bf16 (same kernel, same
// values); the harness holds it within one bf16 step of the reference.
TEST(Bf16Outputs, AreTheFp32OpsRounded) {
  auto rounded = [](const std::vector<float>& f32) {
    std::vector<uint16_t> r(f32.size());
    for (size_t i = 0; i < f32.size(); ++i) r[i] = f32_to_bf16(f32[i]);
    return r;
  };
  const int64_t N = 37, C = 1000, F = 1000, V = 2049;
  auto x = random_floats(N * C, 21, -2.0f, 2.0f), w = random_floats(C, 22, 0.5f, 1.5f);
  std::vector<float> out(N * C), rstd(N), rstd16(N);
  std::vector<uint16_t> out16(N * C);
  cpu::rmsnorm_forward(ctx, out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
  cpu::rmsnorm_forward_bf16(ctx, out16.data(), rstd16.data(), x.data(), w.data(), N, C, 1e-5f);
  EXPECT_EQ(out16, rounded(out));
  EXPECT_EQ(rstd16, rstd);

  auto gu = random_floats(N * 2 * F, 41, -6.0f, 6.0f), dout = random_floats(N * F, 42);
  std::vector<float> h(N * F), dgu(N * 2 * F);
  std::vector<uint16_t> h16(N * F), dgu16(N * 2 * F);
  // bf16 SwiGLU reads bf16: the fp32 op on the widened inputs, rounded.
  const auto widened = [](const std::vector<uint16_t>& b) {
    std::vector<float> f(b.size());
    for (size_t i = 0; i < b.size(); ++i) f[i] = bf16_to_f32(b[i]);
    return f;
  };
  const auto gu16 = rounded(gu), dout16 = rounded(dout);
  const auto guw = widened(gu16), doutw = widened(dout16);
  cpu::swiglu_forward(ctx, h.data(), guw.data(), N, F);
  cpu::swiglu_forward_bf16(ctx, h16.data(), gu16.data(), N, F);
  EXPECT_EQ(h16, rounded(h));
  cpu::swiglu_backward(ctx, dgu.data(), doutw.data(), guw.data(), N, F);
  cpu::swiglu_backward_bf16(ctx, dgu16.data(), dout16.data(), gu16.data(), N, F);
  EXPECT_EQ(dgu16, rounded(dgu));

  auto logits = random_floats(N * V, 51, -8.0f, 8.0f);
  auto targets = random_tokens(N, 0, static_cast<int32_t>(V), 52);
  targets[1] = -1;
  std::vector<float> loss(N), lse(N), dl(N * V);
  std::vector<uint16_t> dl16(N * V);
  cpu::xent_forward(ctx, loss.data(), lse.data(), logits.data(), targets.data(), N, V);
  cpu::xent_backward(ctx, dl.data(), logits.data(), lse.data(), targets.data(), N, V, 0.37f);
  cpu::xent_backward_bf16(ctx, dl16.data(), logits.data(), lse.data(), targets.data(), N, V, 0.37f);
  EXPECT_EQ(dl16, rounded(dl));
}

// ---- Elementwise --------------------------------------------------------------------------

TEST(Elementwise, SumSquaresDoesNotDependOnThreadCount) {
  auto x = random_floats(1000003, 63);
  int prev = omp_get_max_threads();
  omp_set_num_threads(1);
  double s1 = 0, s3 = 0;
  cpu::sum_squares(ctx, &s1, x.data(), static_cast<int64_t>(x.size()));
  omp_set_num_threads(3);
  cpu::sum_squares(ctx, &s3, x.data(), static_cast<int64_t>(x.size()));
  omp_set_num_threads(prev);
  EXPECT_EQ(s1, s3);
}

// ---- AdamW --------------------------------------------------------------------------------

// The step's values: computed in double from the float hyper-parameters (as PyTorch's Python
// floats), close to the same formula in float, and exactly what the bias corrections give at
// step 1 (1 − b1, 1 − b2 in double).
TEST(AdamW, StepScalarsAreTheBiasCorrections) {
  for (int64_t step : {1, 2, 3, 10, 1000, 100000}) {
    const AdamwStepScalars s = adamw_step_scalars(3e-3f, 0.9f, 0.95f, step, 0.25f);
    EXPECT_EQ(s.lr, 3e-3f);
    EXPECT_EQ(s.grad_scale, 0.25f);
    const float bc1 = 1.0f - std::pow(0.9f, static_cast<float>(step));
    const float bc2 = 1.0f - std::pow(0.95f, static_cast<float>(step));
    EXPECT_NEAR(s.step_size, 3e-3f / bc1, 1e-5 * s.step_size) << step;
    EXPECT_NEAR(s.bc2_sqrt, std::sqrt(bc2), 1e-5) << step;
  }
  const AdamwStepScalars s1 = adamw_step_scalars(3e-3f, 0.9f, 0.95f, 1, 1.0f);
  EXPECT_EQ(s1.step_size, static_cast<float>(static_cast<double>(3e-3f) / (1.0 - static_cast<double>(0.9f))));
  EXPECT_EQ(s1.bc2_sqrt, static_cast<float>(std::sqrt(1.0 - static_cast<double>(0.95f))));
}

TEST(AdamW, MatchesReferenceOverSteps) {
  for (int64_t n : {1, 17, 100003}) {
    auto p = random_floats(n, 71), p_ref = p;
    auto m = random_floats(n, 72, -0.01f, 0.01f), m_ref = m;
    auto v = random_floats(n, 73, 1e-6f, 1e-4f), v_ref = v;
    std::vector<uint16_t> pb(n), pb_ref(n);
    for (int64_t step = 1; step <= 3; ++step) {
      auto g = random_floats(n, 80 + step);
      uint16_t* out16 = step == 2 ? nullptr : pb.data();  // also without the bf16 copy
      const AdamwStepScalars s = adamw_step_scalars(3e-3f, 0.9f, 0.95f, step, 0.5f);
      cpu::adamw_step(ctx, p.data(), m.data(), v.data(), out16, g.data(), n, &s, 0.9f, 0.95f, 1e-8f, 0.1f);
      ref::adamw_step(ctx, p_ref.data(), m_ref.data(), v_ref.data(), step == 2 ? nullptr : pb_ref.data(), g.data(), n,
                      &s, 0.9f, 0.95f, 1e-8f, 0.1f);
    }
    // m = b1 m + (1 − b1) g can cancel: absolute tolerances scale with the largest element.
    EXPECT_TRUE(all_close(m, m_ref, 1e-6, 1e-6 * max_abs(m_ref)));
    EXPECT_TRUE(all_close(v, v_ref, 1e-6, 1e-6 * max_abs(v_ref)));
    EXPECT_TRUE(all_close(p, p_ref, 1e-6, 1e-6 * max_abs(p_ref)));
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(pb[i], f32_to_bf16(p[i])) << i;  // the bf16 copy is the rounded fp32 param
      ASSERT_LE(std::abs(int(pb[i]) - int(pb_ref[i])), 1) << i;
    }
  }
}

}  // namespace
}  // namespace ft

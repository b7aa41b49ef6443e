// Op harness, eval part: every fast CPU op (ft::cpu) against the scalar reference (ft::ref) on
// random inputs, over shapes with odd sizes and tails that are not a multiple of 16 lanes.
// GEMM: gemm_test.cpp. Gradients against finite differences: kernels_grad_test.cpp.
#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <limits>
#include <ostream>
#include <random>
#include <vector>

#include "fd_check.h"
#include "kernels/cpu/simd.h"
#include "kernels/ops.h"
#include "tensor/dtype.h"

namespace ft {
namespace {

using test::all_close;
using test::max_abs;
using test::random_floats;
namespace simd = cpu::simd;

std::vector<int32_t> random_tokens(size_t n, int32_t lo, int32_t hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> d(lo, hi - 1);
  std::vector<int32_t> v(n);
  for (auto& t : v) t = d(rng);
  return v;
}

// A bf16-output op's contract: exactly the fp32 op's output rounded to bf16 (same kernel, same
// values), and within one bf16 step of the reference's rounded output (whose fp32 values may
// differ in the last bits and round the other way).
::testing::AssertionResult is_rounded(const std::vector<uint16_t>& got, const std::vector<float>& f32,
                                      const std::vector<uint16_t>& ref16) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != f32_to_bf16(f32[i]))
      return ::testing::AssertionFailure()
             << "element " << i << ": bf16 " << got[i] << " is not round(" << f32[i] << ")";
    if (std::abs(int(got[i]) - int(ref16[i])) > 1 && bf16_to_f32(got[i]) != bf16_to_f32(ref16[i]))
      return ::testing::AssertionFailure()
             << "element " << i << ": bf16 " << bf16_to_f32(got[i]) << " vs reference " << bf16_to_f32(ref16[i]);
  }
  return ::testing::AssertionSuccess();
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

struct EmbShape {
  int64_t N, C, v0, V, vocab;
};
std::ostream& operator<<(std::ostream& os, const EmbShape& s) {
  return os << "N " << s.N << " C " << s.C << " v0 " << s.v0 << " V " << s.V << " vocab " << s.vocab;
}

class Embedding : public ::testing::TestWithParam<EmbShape> {};

TEST_P(Embedding, ForwardAndBackwardMatchReference) {
  auto [N, C, v0, V, vocab] = GetParam();
  auto tokens = random_tokens(N, 0, static_cast<int32_t>(vocab), 11);
  auto table = random_floats(V * C, 12);
  std::vector<float> out(N * C, 7.0f), out_ref(N * C, -7.0f);
  cpu::embedding_forward(out.data(), tokens.data(), table.data(), N, C, v0, V);
  ref::embedding_forward(out_ref.data(), tokens.data(), table.data(), N, C, v0, V);
  EXPECT_EQ(out, out_ref);  // a copy: exact

  auto dout = random_floats(N * C, 13);
  auto dtable = random_floats(V * C, 14);  // backward accumulates into what is there
  auto dtable_ref = dtable;
  cpu::embedding_backward(dtable.data(), dout.data(), tokens.data(), N, C, v0, V);
  ref::embedding_backward(dtable_ref.data(), dout.data(), tokens.data(), N, C, v0, V);
  EXPECT_EQ(dtable, dtable_ref);  // same additions in the same (token) order: exact
}

INSTANTIATE_TEST_SUITE_P(Shapes, Embedding,
                         ::testing::Values(EmbShape{1, 1, 0, 1, 1}, EmbShape{7, 33, 0, 5, 5},
                                           EmbShape{9, 20, 3, 4, 10},        // shard [3, 7)
                                           EmbShape{64, 768, 100, 50, 200},  // shard, many repeats
                                           EmbShape{300, 100, 0, 7, 7}));    // N·C above the threading cut

// Threads split columns, each element sums its tokens in order: the result is bit-identical for
// any thread count.
TEST(Embedding, BackwardDoesNotDependOnThreadCount) {
  const int64_t N = 512, C = 200, V = 9;
  auto tokens = random_tokens(N, 0, V, 15);
  auto dout = random_floats(N * C, 16);
  std::vector<float> d1(V * C, 0.0f), d3(V * C, 0.0f);
  int prev = omp_get_max_threads();
  omp_set_num_threads(1);
  cpu::embedding_backward(d1.data(), dout.data(), tokens.data(), N, C, 0, V);
  omp_set_num_threads(3);
  cpu::embedding_backward(d3.data(), dout.data(), tokens.data(), N, C, 0, V);
  omp_set_num_threads(prev);
  EXPECT_EQ(d1, d3);
}

// ---- RMSNorm ------------------------------------------------------------------------------

class RmsNorm : public ::testing::TestWithParam<std::pair<int64_t, int64_t>> {};

TEST_P(RmsNorm, ForwardAndBackwardMatchReference) {
  auto [N, C] = GetParam();
  auto x = random_floats(N * C, 21, -2.0f, 2.0f);
  auto w = random_floats(C, 22, 0.5f, 1.5f);
  std::vector<float> out(N * C), rstd(N), out_ref(N * C), rstd_ref(N);
  cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
  ref::rmsnorm_forward(out_ref.data(), rstd_ref.data(), x.data(), w.data(), N, C, 1e-5f);
  EXPECT_TRUE(all_close(rstd, rstd_ref, 2e-6, 0));
  EXPECT_TRUE(all_close(out, out_ref, 2e-6, 1e-7 * max_abs(out_ref)));
  std::vector<uint16_t> out16(N * C), out16_ref(N * C);
  std::vector<float> rstd16(N);
  cpu::rmsnorm_forward(out16.data(), rstd16.data(), x.data(), w.data(), N, C, 1e-5f);
  ref::rmsnorm_forward(out16_ref.data(), rstd_ref.data(), x.data(), w.data(), N, C, 1e-5f);
  EXPECT_EQ(rstd16, rstd);
  EXPECT_TRUE(is_rounded(out16, out, out16_ref));

  auto dout = random_floats(N * C, 23);
  std::vector<float> dx(N * C, 3.0f), dx_ref(N * C, -3.0f);
  auto dw = random_floats(C, 24);
  auto dw_ref = dw;
  cpu::rmsnorm_backward(dx.data(), dw.data(), dout.data(), x.data(), w.data(), rstd_ref.data(), N, C);
  ref::rmsnorm_backward(dx_ref.data(), dw_ref.data(), dout.data(), x.data(), w.data(), rstd_ref.data(), N, C);
  // dx = r dy w − x r³/C Σ dy w x cancels when C is small: the tolerance scales with the terms.
  double term = max_abs(rstd_ref) * max_abs(dout) * max_abs(w);
  EXPECT_TRUE(all_close(dx, dx_ref, 1e-5, 1e-6 * term));
  // dweight sums N rows in a different order: tolerance grows with N
  EXPECT_TRUE(all_close(dw, dw_ref, 1e-5, 1e-6 * static_cast<double>(N) * max_abs(dw_ref)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmsNorm,
                         ::testing::Values(std::pair<int64_t, int64_t>{1, 1}, std::pair<int64_t, int64_t>{3, 17},
                                           std::pair<int64_t, int64_t>{5, 100}, std::pair<int64_t, int64_t>{64, 768},
                                           std::pair<int64_t, int64_t>{37, 1000}));

// Activations of a diverging run (|x| ~ 1e30, x² overflows fp32): the fast op must normalise them
// as the reference does (sums in double), not overflow to rstd = 0 and output zeros.
TEST(RmsNorm, HugeActivationsNormaliseLikeTheReference) {
  const int64_t N = 3, C = 40;
  auto x = random_floats(N * C, 25, -1.0f, 1.0f);
  for (float& v : x) v *= 1e30f;
  auto w = random_floats(C, 26, 0.5f, 1.5f), dout = random_floats(N * C, 27);
  std::vector<float> out(N * C), rstd(N), out_ref(N * C), rstd_ref(N);
  cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
  ref::rmsnorm_forward(out_ref.data(), rstd_ref.data(), x.data(), w.data(), N, C, 1e-5f);
  EXPECT_TRUE(all_close(rstd, rstd_ref, 2e-6, 0));
  EXPECT_TRUE(all_close(out, out_ref, 2e-6, 1e-6));
  std::vector<float> dx(N * C), dx_ref(N * C), dw(C, 0.0f), dw_ref(C, 0.0f);
  cpu::rmsnorm_backward(dx.data(), dw.data(), dout.data(), x.data(), w.data(), rstd_ref.data(), N, C);
  ref::rmsnorm_backward(dx_ref.data(), dw_ref.data(), dout.data(), x.data(), w.data(), rstd_ref.data(), N, C);
  EXPECT_TRUE(all_close(dx, dx_ref, 1e-5, 1e-6 * max_abs(dx_ref)));
  EXPECT_TRUE(all_close(dw, dw_ref, 1e-5, 1e-6 * max_abs(dw_ref)));
}

// ---- RoPE ---------------------------------------------------------------------------------

struct RopeShape {
  int64_t B, T, H, Hkv, D, pos0;
};
std::ostream& operator<<(std::ostream& os, const RopeShape& s) {
  return os << "B " << s.B << " T " << s.T << " H " << s.H << " Hkv " << s.Hkv << " D " << s.D << " pos0 " << s.pos0;
}

class Rope : public ::testing::TestWithParam<RopeShape> {};

TEST_P(Rope, ForwardBackwardAndTablesMatchReference) {
  auto [B, T, H, Hkv, D, pos0] = GetParam();
  int64_t max_pos = pos0 + T + 3, half = D / 2;
  std::vector<float> cos(max_pos * half), sin(max_pos * half), cos_ref(max_pos * half), sin_ref(max_pos * half);
  cpu::rope_tables(cos.data(), sin.data(), max_pos, D, 10000.0f);
  ref::rope_tables(cos_ref.data(), sin_ref.data(), max_pos, D, 10000.0f);
  EXPECT_EQ(cos, cos_ref);
  EXPECT_EQ(sin, sin_ref);

  int64_t n = B * T * (H + 2 * Hkv) * D;
  auto qkv = random_floats(n, 31);
  auto qkv_ref = qkv;
  cpu::rope_forward(qkv.data(), cos.data(), sin.data(), B, T, H, Hkv, D, pos0);
  ref::rope_forward(qkv_ref.data(), cos.data(), sin.data(), B, T, H, Hkv, D, pos0);
  EXPECT_TRUE(all_close(qkv, qkv_ref, 1e-6, 1e-7));

  auto dqkv = random_floats(n, 32);
  auto dqkv_ref = dqkv;
  cpu::rope_backward(dqkv.data(), cos.data(), sin.data(), B, T, H, Hkv, D, pos0);
  ref::rope_backward(dqkv_ref.data(), cos.data(), sin.data(), B, T, H, Hkv, D, pos0);
  EXPECT_TRUE(all_close(dqkv, dqkv_ref, 1e-6, 1e-7));
}

INSTANTIATE_TEST_SUITE_P(Shapes, Rope,
                         ::testing::Values(RopeShape{1, 1, 1, 1, 2, 0}, RopeShape{2, 5, 4, 2, 6, 3},
                                           RopeShape{1, 3, 2, 1, 34, 0},  // half = 17
                                           RopeShape{2, 16, 4, 2, 64, 7},
                                           RopeShape{2, 40, 4, 4, 64, 0}));  // above the threading cut

// ---- SwiGLU -------------------------------------------------------------------------------

class SwiGlu : public ::testing::TestWithParam<std::pair<int64_t, int64_t>> {};

TEST_P(SwiGlu, ForwardAndBackwardMatchReference) {
  auto [N, F] = GetParam();
  auto gu = random_floats(N * 2 * F, 41, -6.0f, 6.0f);
  std::vector<float> out(N * F), out_ref(N * F);
  cpu::swiglu_forward(out.data(), gu.data(), N, F);
  ref::swiglu_forward(out_ref.data(), gu.data(), N, F);
  EXPECT_TRUE(all_close(out, out_ref, 1e-6, 1e-7));

  auto dout = random_floats(N * F, 42);
  std::vector<float> dgu(N * 2 * F, 5.0f), dgu_ref(N * 2 * F, -5.0f);
  cpu::swiglu_backward(dgu.data(), dout.data(), gu.data(), N, F);
  ref::swiglu_backward(dgu_ref.data(), dout.data(), gu.data(), N, F);
  EXPECT_TRUE(all_close(dgu, dgu_ref, 2e-6, 1e-7));

  std::vector<uint16_t> out16(N * F), out16_ref(N * F), dgu16(N * 2 * F), dgu16_ref(N * 2 * F);
  cpu::swiglu_forward(out16.data(), gu.data(), N, F);
  ref::swiglu_forward(out16_ref.data(), gu.data(), N, F);
  EXPECT_TRUE(is_rounded(out16, out, out16_ref));
  cpu::swiglu_backward(dgu16.data(), dout.data(), gu.data(), N, F);
  ref::swiglu_backward(dgu16_ref.data(), dout.data(), gu.data(), N, F);
  EXPECT_TRUE(is_rounded(dgu16, dgu, dgu16_ref));
}

INSTANTIATE_TEST_SUITE_P(Shapes, SwiGlu,
                         ::testing::Values(std::pair<int64_t, int64_t>{1, 1}, std::pair<int64_t, int64_t>{3, 17},
                                           std::pair<int64_t, int64_t>{64, 1000}));

TEST(SwiGlu, OverflowingProductsFollowTheReference) {
  // silu(-1e30) = -0: times a huge up value it stays 0 (a fused g u / (1 + e^-g) would give NaN).
  std::vector<float> gu = {-1e30f, 1e30f}, out(1), out_ref(1);
  cpu::swiglu_forward(out.data(), gu.data(), 1, 1);
  ref::swiglu_forward(out_ref.data(), gu.data(), 1, 1);
  EXPECT_EQ(out[0], out_ref[0]);
  EXPECT_FALSE(std::isnan(out[0]));
}

TEST(SwiGlu, ExtremeGatesStayFinite) {
  std::vector<float> gu = {-200.0f, 200.0f, -90.0f, 3.0f, 2.0f, -1.0f};  // N = 1, F = 3
  std::vector<float> out(3), out_ref(3), dout = {0.5f, -0.25f, 2.0f}, dgu(6), dgu_ref(6);
  cpu::swiglu_forward(out.data(), gu.data(), 1, 3);
  ref::swiglu_forward(out_ref.data(), gu.data(), 1, 3);
  EXPECT_TRUE(all_close(out, out_ref, 1e-6, 1e-30));
  cpu::swiglu_backward(dgu.data(), dout.data(), gu.data(), 1, 3);
  ref::swiglu_backward(dgu_ref.data(), dout.data(), gu.data(), 1, 3);
  EXPECT_TRUE(all_close(dgu, dgu_ref, 1e-6, 1e-30));
}

// ---- Cross-entropy ------------------------------------------------------------------------

class Xent : public ::testing::TestWithParam<std::pair<int64_t, int64_t>> {};

TEST_P(Xent, ForwardAndBackwardMatchReference) {
  auto [N, V] = GetParam();
  auto logits = random_floats(N * V, 51, -8.0f, 8.0f);
  // Targets in range, ignored (-1, -5) and of another shard (>= V).
  auto targets = random_tokens(N, 0, static_cast<int32_t>(V), 52);
  for (int64_t n = 0; n < N; ++n) {
    if (n % 4 == 1) targets[n] = -1;
    if (n % 4 == 2) targets[n] = static_cast<int32_t>(V + n);
    if (n % 7 == 5) targets[n] = -5;
  }
  std::vector<float> loss(N, 9.0f), lse(N), loss_ref(N, -9.0f), lse_ref(N);
  cpu::xent_forward(loss.data(), lse.data(), logits.data(), targets.data(), N, V);
  ref::xent_forward(loss_ref.data(), lse_ref.data(), logits.data(), targets.data(), N, V);
  EXPECT_TRUE(all_close(lse, lse_ref, 1e-6, 1e-6));
  EXPECT_TRUE(all_close(loss, loss_ref, 1e-6, 1e-6));

  std::vector<float> dl(N * V, 1.0f), dl_ref(N * V, -1.0f);
  cpu::xent_backward(dl.data(), logits.data(), lse_ref.data(), targets.data(), N, V, 0.37f);
  ref::xent_backward(dl_ref.data(), logits.data(), lse_ref.data(), targets.data(), N, V, 0.37f);
  EXPECT_TRUE(all_close(dl, dl_ref, 2e-6, 1e-9));

  // In place: dlogits aliasing logits gives the same result.
  auto inplace = logits;
  cpu::xent_backward(inplace.data(), inplace.data(), lse_ref.data(), targets.data(), N, V, 0.37f);
  EXPECT_EQ(inplace, dl);

  std::vector<uint16_t> dl16(N * V, 1), dl16_ref(N * V, 2);
  cpu::xent_backward(dl16.data(), logits.data(), lse_ref.data(), targets.data(), N, V, 0.37f);
  ref::xent_backward(dl16_ref.data(), logits.data(), lse_ref.data(), targets.data(), N, V, 0.37f);
  EXPECT_TRUE(is_rounded(dl16, dl, dl16_ref));
}

INSTANTIATE_TEST_SUITE_P(Shapes, Xent,
                         ::testing::Values(std::pair<int64_t, int64_t>{1, 1}, std::pair<int64_t, int64_t>{4, 17},
                                           std::pair<int64_t, int64_t>{9, 1000}, std::pair<int64_t, int64_t>{8, 32000},
                                           std::pair<int64_t, int64_t>{3, 2049}));

TEST(Xent, LargeLogitsDoNotOverflow) {
  std::vector<float> logits = {1000.0f, 999.0f, -1000.0f, 998.5f, 0.0f};
  std::vector<int32_t> t = {1};
  float loss, lse, loss_ref, lse_ref;
  cpu::xent_forward(&loss, &lse, logits.data(), t.data(), 1, 5);
  ref::xent_forward(&loss_ref, &lse_ref, logits.data(), t.data(), 1, 5);
  EXPECT_FLOAT_EQ(lse, lse_ref);
  EXPECT_NEAR(loss, loss_ref, 1e-4);
  EXPECT_TRUE(std::isfinite(loss));
}

// ---- Elementwise --------------------------------------------------------------------------

class Elementwise : public ::testing::TestWithParam<int64_t> {};

TEST_P(Elementwise, MatchReference) {
  int64_t n = GetParam();
  auto x = random_floats(n, 61), y = random_floats(n, 62);
  auto y_ref = y;
  cpu::add_inplace(y.data(), x.data(), n);
  ref::add_inplace(y_ref.data(), x.data(), n);
  EXPECT_EQ(y, y_ref);
  cpu::scale_inplace(y.data(), -0.75f, n);
  ref::scale_inplace(y_ref.data(), -0.75f, n);
  EXPECT_EQ(y, y_ref);
  double s = cpu::sum_squares(x.data(), n), s_ref = ref::sum_squares(x.data(), n);
  EXPECT_NEAR(s, s_ref, 1e-12 * s_ref);
  // Rounding ties to even, and NaN stays NaN, in the vector body and the tail alike.
  for (int64_t i = 0; i < n; i += 7)  // halfway between two bf16 values, alternately odd and even below
    x[i] = std::bit_cast<float>(static_cast<uint32_t>(0x3f808000u + ((i / 7) % 2) * 0x10000u));
  if (n > 3) x[3] = std::numeric_limits<float>::quiet_NaN();
  std::vector<uint16_t> b(n), b_ref(n);
  cpu::to_bf16(b.data(), x.data(), n);
  ref::to_bf16(b_ref.data(), x.data(), n);
  EXPECT_EQ(b, b_ref);
  if (n > 3) {
    EXPECT_TRUE(std::isnan(bf16_to_f32(b[3])));
  }
}

TEST(Elementwise, SumSquaresDoesNotDependOnThreadCount) {
  auto x = random_floats(1000003, 63);
  int prev = omp_get_max_threads();
  omp_set_num_threads(1);
  double s1 = cpu::sum_squares(x.data(), static_cast<int64_t>(x.size()));
  omp_set_num_threads(3);
  double s3 = cpu::sum_squares(x.data(), static_cast<int64_t>(x.size()));
  omp_set_num_threads(prev);
  EXPECT_EQ(s1, s3);
}

INSTANTIATE_TEST_SUITE_P(Sizes, Elementwise, ::testing::Values(1, 15, 17, 1000, 100003, 1 << 20));

// ---- AdamW --------------------------------------------------------------------------------

class AdamW : public ::testing::TestWithParam<int64_t> {};

TEST_P(AdamW, MatchesReferenceOverSteps) {
  int64_t n = GetParam();
  auto p = random_floats(n, 71), p_ref = p;
  auto m = random_floats(n, 72, -0.01f, 0.01f), m_ref = m;
  auto v = random_floats(n, 73, 1e-6f, 1e-4f), v_ref = v;
  std::vector<uint16_t> pb(n), pb_ref(n);
  for (int64_t step = 1; step <= 3; ++step) {
    auto g = random_floats(n, 80 + step);
    uint16_t* out16 = step == 2 ? nullptr : pb.data();  // also without the bf16 copy
    cpu::adamw_step(p.data(), m.data(), v.data(), out16, g.data(), n, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step, 0.5f);
    ref::adamw_step(p_ref.data(), m_ref.data(), v_ref.data(), step == 2 ? nullptr : pb_ref.data(), g.data(), n, 3e-3f,
                    0.9f, 0.95f, 1e-8f, 0.1f, step, 0.5f);
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

INSTANTIATE_TEST_SUITE_P(Sizes, AdamW, ::testing::Values(1, 17, 100003));

}  // namespace
}  // namespace ft

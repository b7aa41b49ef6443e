// Attention beyond the op harness's rows (tests/ops/rows_attention.cpp: every op against the
// reference on odd shapes, backward against finite differences): both backward schedules (chosen
// by the thread count) against the reference and across key/query blocks against finite
// differences, the KV-cache decode op against full attention, bad sizes, and the claim that
// scratch memory does not grow as T².
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/ops.h"
#include "kernels/ref/ref_impl.h"
#include "tensor/memory.h"
#include "util/error.h"

namespace ft {
namespace {

const ExecContext& ctx = cpu_context();

struct Shape {
  int64_t B, T, H, Hkv, D;
  int64_t row() const { return (H + 2 * Hkv) * D; }
  int64_t qkv_size() const { return B * T * row(); }
  int64_t out_size() const { return B * T * H * D; }
  int64_t lse_size() const { return B * H * T; }
};

std::string name(const Shape& s) {
  return "B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) + " H=" + std::to_string(s.H) +
         " Hkv=" + std::to_string(s.Hkv) + " D=" + std::to_string(s.D);
}

std::vector<float> random_vec(int64_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

// max |a - b| / max |b|: the error relative to the size of the reference values.
double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::fabs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::fabs(static_cast<double>(b[i])));
  }
  return num / std::max(den, 1e-30);
}

// Runs fn with `threads` OpenMP threads, restoring the previous setting.
template <typename Fn>
void with_threads(int threads, Fn fn) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  fn();
  omp_set_num_threads(before);
}

// Shapes: T = 1, T below/at/above the 64-wide blocks, GQA and MHA, D = 16/64/128 and D = 24
// (not a multiple of the 16-float vectors).
const std::vector<Shape> kShapes = {
    {1, 1, 2, 1, 16},   {2, 5, 4, 4, 16},    {1, 64, 2, 1, 64},  {2, 67, 4, 2, 16},
    {1, 130, 3, 3, 64}, {1, 100, 4, 1, 128}, {2, 129, 2, 2, 24}, {1, 200, 6, 2, 64},
};

TEST(Attention, BackwardMatchesReferenceUnderEveryThreadCount) {
  // The two-pass schedule runs when B·Hkv = 1 with 2 threads and B·Hkv in {1, 2, 4} with 3;
  // every other case here (and every case with 1 thread) runs the fused one.
  for (const Shape& s : kShapes) {
    auto qkv = random_vec(s.qkv_size(), 11 + s.T, 2.0f);
    auto dout = random_vec(s.out_size(), 12 + s.T);
    std::vector<float> out(s.out_size()), lse(s.lse_size()), dqkv_ref(s.qkv_size());
    ref::attention_forward(ctx, out.data(), lse.data(), qkv.data(), s.B, s.T, s.H, s.Hkv, s.D);
    ref::attention_backward(ctx, dqkv_ref.data(), dout.data(), qkv.data(), out.data(), lse.data(), s.B, s.T, s.H, s.Hkv,
                            s.D);
    for (int threads : {1, 2, 3}) {
      SCOPED_TRACE(name(s) + " threads=" + std::to_string(threads));
      std::vector<float> dqkv(s.qkv_size(), std::nanf(""));  // every element must be written
      with_threads(threads, [&] {
        cpu::attention_backward(ctx, dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), s.B, s.T, s.H, s.Hkv,
                                s.D);
      });
      EXPECT_LT(rel_err(dqkv, dqkv_ref), 1e-5);
    }
  }
}

// loss(qkv) = Σ w ∘ attention(qkv) in float64, through the double reference.
double loss64(const std::vector<double>& qkv, const std::vector<double>& w, const Shape& s) {
  std::vector<double> out(s.out_size()), lse(s.lse_size());
  ref_impl::attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.T, s.H, s.Hkv, s.D);
  double l = 0;
  for (size_t i = 0; i < out.size(); ++i) l += w[i] * out[i];
  return l;
}

// Checks d loss / d qkv of the float backward ops against central differences at `coords`.
void check_against_finite_differences(const Shape& s, const std::vector<int64_t>& coords) {
  auto qkv = random_vec(s.qkv_size(), 21 + s.T, 1.5f);
  auto w = random_vec(s.out_size(), 22 + s.T);
  std::vector<double> qkv64(qkv.begin(), qkv.end()), w64(w.begin(), w.end());
  std::vector<float> out(s.out_size()), lse(s.lse_size());
  std::vector<float> g_ref(s.qkv_size()), g_cpu(s.qkv_size());
  ref::attention_forward(ctx, out.data(), lse.data(), qkv.data(), s.B, s.T, s.H, s.Hkv, s.D);
  ref::attention_backward(ctx, g_ref.data(), w.data(), qkv.data(), out.data(), lse.data(), s.B, s.T, s.H, s.Hkv, s.D);
  cpu::attention_forward(ctx, out.data(), lse.data(), qkv.data(), s.B, s.T, s.H, s.Hkv, s.D);
  cpu::attention_backward(ctx, g_cpu.data(), w.data(), qkv.data(), out.data(), lse.data(), s.B, s.T, s.H, s.Hkv, s.D);
  const double h = 1e-5;
  std::vector<float> fd, ref_at, cpu_at;
  for (int64_t c : coords) {
    const double x = qkv64[c];
    qkv64[c] = x + h;
    const double lp = loss64(qkv64, w64, s);
    qkv64[c] = x - h;
    const double lm = loss64(qkv64, w64, s);
    qkv64[c] = x;
    fd.push_back(static_cast<float>((lp - lm) / (2 * h)));
    ref_at.push_back(g_ref[c]);
    cpu_at.push_back(g_cpu[c]);
  }
  EXPECT_LT(rel_err(ref_at, fd), 5e-6) << "reference backward vs finite differences";
  EXPECT_LT(rel_err(cpu_at, fd), 5e-6) << "cpu backward vs finite differences";
}

TEST(Attention, BackwardMatchesFiniteDifferencesAcrossBlocks) {
  // T = 70 spans two key and query blocks; sample q, k and v coordinates of every region.
  const Shape s{1, 70, 2, 1, 16};
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int64_t> pick(0, s.qkv_size() - 1);
  std::vector<int64_t> coords(160);
  for (auto& c : coords) c = pick(rng);
  with_threads(2, [&] { check_against_finite_differences(s, coords); });  // two-pass schedule
  with_threads(1, [&] { check_against_finite_differences(s, coords); });  // fused schedule
}

TEST(Attention, DecodeWholeSequenceEqualsForward) {
  for (const Shape& s : {Shape{2, 37, 4, 2, 16}, Shape{1, 130, 2, 1, 64}}) {
    SCOPED_TRACE(name(s));
    const int64_t max_T = s.T + 9;
    auto qkv = random_vec(s.qkv_size(), 31 + s.T);
    std::vector<float> out(s.out_size()), lse(s.lse_size()), dec(s.out_size()), dec_ref(s.out_size());
    std::vector<float> kc(s.B * s.Hkv * max_T * s.D), vc(kc.size());
    cpu::attention_forward(ctx, out.data(), lse.data(), qkv.data(), s.B, s.T, s.H, s.Hkv, s.D);
    cpu::kv_cache_write(ctx, kc.data(), vc.data(), qkv.data(), s.B, s.T, s.H, s.Hkv, s.D, 0, max_T);
    cpu::attention_decode(ctx, dec.data(), qkv.data(), kc.data(), vc.data(), s.B, s.T, s.T, s.H, s.Hkv, s.D, max_T);
    std::vector<float> kr(kc.size()), vr(kc.size());
    ref::kv_cache_write(ctx, kr.data(), vr.data(), qkv.data(), s.B, s.T, s.H, s.Hkv, s.D, 0, max_T);
    ref::attention_decode(ctx, dec_ref.data(), qkv.data(), kr.data(), vr.data(), s.B, s.T, s.T, s.H, s.Hkv, s.D, max_T);
    EXPECT_LT(rel_err(dec, out), 2e-6);
    EXPECT_LT(rel_err(dec_ref, out), 2e-6);
  }
}

TEST(Attention, DecodeTokenByTokenEqualsForward) {
  // A prompt of 5 tokens, then one token at a time, then a chunk of 3: each step writes its
  // keys and values to the cache and decodes its queries.
  const Shape s{2, 12, 6, 2, 64};
  const int64_t max_T = 16;
  auto qkv = random_vec(s.qkv_size(), 41);
  std::vector<float> out(s.out_size()), lse(s.lse_size());
  cpu::attention_forward(ctx, out.data(), lse.data(), qkv.data(), s.B, s.T, s.H, s.Hkv, s.D);
  std::vector<float> kc(s.B * s.Hkv * max_T * s.D, std::nanf("")), vc(kc);  // unwritten = NaN
  std::vector<float> dec(s.out_size()), dec_ref(s.out_size());
  for (auto [pos0, n] : std::vector<std::pair<int64_t, int64_t>>{{0, 5}, {5, 1}, {6, 1}, {7, 1}, {8, 1}, {9, 3}}) {
    std::vector<float> chunk(s.B * n * s.row()), o(s.B * n * s.H * s.D), o_ref(o.size());
    for (int64_t b = 0; b < s.B; ++b)
      std::copy_n(qkv.begin() + (b * s.T + pos0) * s.row(), n * s.row(), chunk.begin() + b * n * s.row());
    cpu::kv_cache_write(ctx, kc.data(), vc.data(), chunk.data(), s.B, n, s.H, s.Hkv, s.D, pos0, max_T);
    cpu::attention_decode(ctx, o.data(), chunk.data(), kc.data(), vc.data(), s.B, n, pos0 + n, s.H, s.Hkv, s.D, max_T);
    ref::attention_decode(ctx, o_ref.data(), chunk.data(), kc.data(), vc.data(), s.B, n, pos0 + n, s.H, s.Hkv, s.D,
                          max_T);
    for (int64_t b = 0; b < s.B; ++b) {
      std::copy_n(o.begin() + b * n * s.H * s.D, n * s.H * s.D, dec.begin() + (b * s.T + pos0) * s.H * s.D);
      std::copy_n(o_ref.begin() + b * n * s.H * s.D, n * s.H * s.D, dec_ref.begin() + (b * s.T + pos0) * s.H * s.D);
    }
  }
  EXPECT_LT(rel_err(dec, out), 2e-6);
  EXPECT_LT(rel_err(dec_ref, out), 2e-6);
}

TEST(Attention, BadSizesAreErrors) {
  std::vector<float> buf(4096);
  float* p = buf.data();
  EXPECT_THROW(cpu::attention_forward(ctx, p, p, p, 1, 4, 3, 2, 16), Error);  // H % Hkv != 0
  EXPECT_THROW(cpu::attention_backward(ctx, p, p, p, p, p, 1, 4, 2, 1, 0), Error);
  // The cache holds 8 positions: writing 4 at position 6 or decoding with Tk = 9 overflows.
  EXPECT_THROW(cpu::kv_cache_write(ctx, p, p, p, 1, 4, 2, 1, 16, 6, 8), Error);
  EXPECT_THROW(ref::kv_cache_write(ctx, p, p, p, 1, 4, 2, 1, 16, 6, 8), Error);
  EXPECT_THROW(cpu::attention_decode(ctx, p, p, p, p, 1, 1, 9, 2, 1, 16, 8), Error);
  EXPECT_THROW(ref::attention_decode(ctx, p, p, p, p, 1, 2, 1, 2, 1, 16, 8), Error);  // Tq > Tk
}

TEST(Attention, ScratchDoesNotGrowWithTSquared) {
  // At T = 2048 a single (T, T) float matrix is 16 MiB. The kernels' workspace is linear in T:
  // per thread the keys and values of one head (2 T D floats) and a few tiles, plus D_i
  // (B, H, T) in backward (attention.cpp states the sizes).
  const Shape s{1, 2048, 2, 1, 64};
  auto qkv = random_vec(s.qkv_size(), 51);
  auto dout = random_vec(s.out_size(), 52);
  std::vector<float> out(s.out_size()), lse(s.lse_size()), dqkv(s.qkv_size());
  auto& mem = MemoryTracker::global();
  mem.reset_peaks();
  const int64_t before = mem.live(MemCategory::kWorkspace);
  cpu::attention_forward(ctx, out.data(), lse.data(), qkv.data(), s.B, s.T, s.H, s.Hkv, s.D);
  cpu::attention_backward(ctx, dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), s.B, s.T, s.H, s.Hkv, s.D);
  const int64_t used = mem.peak(MemCategory::kWorkspace) - before;
  const int64_t per_thread = 4 * 2 * s.T * s.D + 260 * 1024;
  EXPECT_GT(used, 4 * 2 * s.T * s.D);  // the kernels do account their scratch
  EXPECT_LT(used, 4 * s.lse_size() + per_thread * omp_get_max_threads());
  EXPECT_EQ(mem.live(MemCategory::kWorkspace), before);  // and free it
}

}  // namespace
}  // namespace ft

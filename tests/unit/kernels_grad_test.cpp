// Op harness, gradient part: every backward op against float64 central finite differences of
// its forward. The forward runs as the double instantiation of the reference templates
// (kernels/ref/ref_impl.h); the loss is a random-weighted sum Σ w ∘ out, so every output element
// matters with a different weight. Checked: the reference backward in double (tight tolerance)
// and the fast CPU backward in float (fp32 tolerance).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "fd_check.h"
#include "kernels/ops.h"
#include "kernels/ref/ref_impl.h"

namespace ft {
namespace {

using test::all_close;
using test::cast_vec;
using test::dot;
using test::fd_gradient;
using test::max_abs;
using test::random_doubles;

constexpr double kRefRtol = 1e-6;  // double analytic vs FD: FD truncation error only
constexpr double kCpuRtol = 2e-4;  // float analytic vs FD

// Absolute tolerance for a gradient vector: a fraction of its largest element.
double atol_for(const std::vector<double>& fd, double frac) {
  return frac * max_abs(fd);
}

TEST(Grad, Embedding) {
  const int64_t N = 7, C = 5, v0 = 2, V = 4;
  std::vector<int32_t> tokens = {2, 5, 3, 2, 0, 7, 5};  // repeats, and tokens outside [2, 6)
  auto table = random_doubles(V * C, 1);
  auto w = random_doubles(N * C, 2);
  auto loss = [&](const double* t) {
    std::vector<double> out(N * C);
    ref_impl::embedding_forward(out.data(), tokens.data(), t, N, C, v0, V);
    return dot(w, out);
  };
  auto fd = fd_gradient(loss, table);

  std::vector<double> d_ref(V * C, 0.0);
  ref_impl::embedding_backward(d_ref.data(), w.data(), tokens.data(), N, C, v0, V);
  EXPECT_TRUE(all_close(d_ref, fd, kRefRtol, atol_for(fd, 1e-9)));

  // The fast op accumulates: start from a non-zero gradient.
  auto d0 = test::random_floats(V * C, 3);
  auto d = d0;
  auto wf = cast_vec<float>(w);
  cpu::embedding_backward(d.data(), wf.data(), tokens.data(), N, C, v0, V);
  std::vector<double> want(V * C);
  for (int64_t i = 0; i < V * C; ++i) want[i] = d0[i] + fd[i];
  EXPECT_TRUE(all_close(d, want, kCpuRtol, atol_for(fd, 1e-5)));
}

TEST(Grad, RmsNorm) {
  const int64_t N = 3, C = 19;
  const double eps = 1e-5;
  auto x = random_doubles(N * C, 11, -2.0, 2.0);
  auto g = random_doubles(C, 12, 0.5, 1.5);
  auto w = random_doubles(N * C, 13);
  auto forward = [&](const double* xin, const double* gin) {
    std::vector<double> out(N * C), rstd(N);
    ref_impl::rmsnorm_forward(out.data(), rstd.data(), xin, gin, N, C, eps);
    return dot(w, out);
  };
  auto fd_x = fd_gradient([&](const double* xin) { return forward(xin, g.data()); }, x);
  auto fd_g = fd_gradient([&](const double* gin) { return forward(x.data(), gin); }, g);

  std::vector<double> out(N * C), rstd(N), dx(N * C), dg(C, 0.0);
  ref_impl::rmsnorm_forward(out.data(), rstd.data(), x.data(), g.data(), N, C, eps);
  ref_impl::rmsnorm_backward(dx.data(), dg.data(), w.data(), x.data(), g.data(), rstd.data(), N, C);
  EXPECT_TRUE(all_close(dx, fd_x, kRefRtol, atol_for(fd_x, 1e-9)));
  EXPECT_TRUE(all_close(dg, fd_g, kRefRtol, atol_for(fd_g, 1e-9)));

  auto xf = cast_vec<float>(x), gf = cast_vec<float>(g), wf = cast_vec<float>(w);
  std::vector<float> outf(N * C), rstdf(N), dxf(N * C), dgf(C, 0.0f);
  cpu::rmsnorm_forward(outf.data(), rstdf.data(), xf.data(), gf.data(), N, C, static_cast<float>(eps));
  cpu::rmsnorm_backward(dxf.data(), dgf.data(), wf.data(), xf.data(), gf.data(), rstdf.data(), N, C);
  EXPECT_TRUE(all_close(dxf, fd_x, kCpuRtol, atol_for(fd_x, 1e-5)));
  EXPECT_TRUE(all_close(dgf, fd_g, kCpuRtol, atol_for(fd_g, 1e-5)));
}

TEST(Grad, Rope) {
  const int64_t B = 2, T = 3, H = 2, Hkv = 1, D = 6, pos0 = 2, max_pos = 8, half = D / 2;
  const int64_t n = B * T * (H + 2 * Hkv) * D;
  std::vector<double> cos(max_pos * half), sin(max_pos * half);
  ref_impl::rope_tables(cos.data(), sin.data(), max_pos, D, 10000.0);
  auto qkv = random_doubles(n, 21);
  auto w = random_doubles(n, 22);
  auto loss = [&](const double* in) {
    std::vector<double> out(in, in + n);
    ref_impl::rope_apply(out.data(), cos.data(), sin.data(), B, T, H, Hkv, D, pos0, 1.0);
    return dot(w, out);
  };
  auto fd = fd_gradient(loss, qkv);  // value heads: d loss / d v = w, untouched by RoPE

  auto d = w;
  ref_impl::rope_apply(d.data(), cos.data(), sin.data(), B, T, H, Hkv, D, pos0, -1.0);
  EXPECT_TRUE(all_close(d, fd, kRefRtol, atol_for(fd, 1e-9)));

  std::vector<float> cosf(max_pos * half), sinf(max_pos * half);
  cpu::rope_tables(cosf.data(), sinf.data(), max_pos, D, 10000.0f);
  auto df = cast_vec<float>(w);
  cpu::rope_backward(df.data(), cosf.data(), sinf.data(), B, T, H, Hkv, D, pos0);
  EXPECT_TRUE(all_close(df, fd, kCpuRtol, atol_for(fd, 1e-5)));
}

TEST(Grad, SwiGlu) {
  const int64_t N = 3, F = 17;
  auto gu = random_doubles(N * 2 * F, 31, -4.0, 4.0);
  auto w = random_doubles(N * F, 32);
  auto loss = [&](const double* in) {
    std::vector<double> out(N * F);
    ref_impl::swiglu_forward(out.data(), in, N, F);
    return dot(w, out);
  };
  auto fd = fd_gradient(loss, gu);

  std::vector<double> d(N * 2 * F);
  ref_impl::swiglu_backward(d.data(), w.data(), gu.data(), N, F);
  EXPECT_TRUE(all_close(d, fd, kRefRtol, atol_for(fd, 1e-9)));

  auto guf = cast_vec<float>(gu), wf = cast_vec<float>(w);
  std::vector<float> df(N * 2 * F);
  cpu::swiglu_backward(df.data(), wf.data(), guf.data(), N, F);
  EXPECT_TRUE(all_close(df, fd, kCpuRtol, atol_for(fd, 1e-5)));
}

// xent_backward is the gradient of scale · Σ over rows with a target >= 0 of
// (lse − logit of the target when the target is in this shard): the loss for own targets, and the
// shard's share of the log-sum-exp for targets of another shard (>= V).
TEST(Grad, CrossEntropy) {
  const int64_t N = 6, V = 11;
  const double scale = 0.3;
  std::vector<int32_t> targets = {3, -1, 10, 11, 0, 25};  // ignored, in shard, other shard
  auto z = random_doubles(N * V, 41, -3.0, 3.0);
  auto loss = [&](const double* in) {
    std::vector<double> l(N), lse(N);
    ref_impl::xent_forward(l.data(), lse.data(), in, targets.data(), N, V);
    double s = 0;
    for (int64_t n = 0; n < N; ++n) {
      if (targets[n] < 0) continue;
      s += lse[n] - (targets[n] < V ? in[n * V + targets[n]] : 0.0);
    }
    return scale * s;
  };
  auto fd = fd_gradient(loss, z);

  std::vector<double> l(N), lse(N), d(N * V);
  ref_impl::xent_forward(l.data(), lse.data(), z.data(), targets.data(), N, V);
  ref_impl::xent_backward(d.data(), z.data(), lse.data(), targets.data(), N, V, scale);
  EXPECT_TRUE(all_close(d, fd, kRefRtol, atol_for(fd, 1e-9)));

  auto zf = cast_vec<float>(z);
  std::vector<float> lf(N), lsef(N), df(N * V);
  cpu::xent_forward(lf.data(), lsef.data(), zf.data(), targets.data(), N, V);
  cpu::xent_backward(df.data(), zf.data(), lsef.data(), targets.data(), N, V, static_cast<float>(scale));
  EXPECT_TRUE(all_close(df, fd, kCpuRtol, atol_for(fd, 1e-5)));
}

// GEMM has no backward op, but the model builds one from matmul transposes; check that the
// identities it relies on hold with the fast op: for C = A B,
//   dA = dC Bᵀ (matmul(dA, dC, B, trans_b)),  dB = Aᵀ dC (matmul(dB, A, dC, trans_a)).
TEST(Grad, MatmulTransposesGiveTheLinearGradients) {
  const int64_t M = 4, N = 5, K = 3;
  auto A = random_doubles(M * K, 51), B = random_doubles(K * N, 52), w = random_doubles(M * N, 53);
  auto loss_a = [&](const double* a) {
    std::vector<double> C(M * N);
    ref_impl::matmul(C.data(), a, B.data(), M, N, K, false, false, 0.0);
    return dot(w, C);
  };
  auto loss_b = [&](const double* b) {
    std::vector<double> C(M * N);
    ref_impl::matmul(C.data(), A.data(), b, M, N, K, false, false, 0.0);
    return dot(w, C);
  };
  auto fd_a = fd_gradient(loss_a, A), fd_b = fd_gradient(loss_b, B);
  auto Af = cast_vec<float>(A), Bf = cast_vec<float>(B), wf = cast_vec<float>(w);
  std::vector<float> dA(M * K), dB(K * N);
  cpu::matmul(dA.data(), wf.data(), Bf.data(), M, K, N, false, true, 0.0f, Precision::kF32);
  cpu::matmul(dB.data(), Af.data(), wf.data(), K, N, M, true, false, 0.0f, Precision::kF32);
  EXPECT_TRUE(all_close(dA, fd_a, kCpuRtol, atol_for(fd_a, 1e-5)));
  EXPECT_TRUE(all_close(dB, fd_b, kCpuRtol, atol_for(fd_b, 1e-5)));
}

}  // namespace
}  // namespace ft

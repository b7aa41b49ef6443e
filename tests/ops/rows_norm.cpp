// Rows: rmsnorm_forward, rmsnorm_forward_bf16, rmsnorm_backward (with and without the residual).
#include "kernels/ref/ref_impl.h"
#include "ops/op_cases.h"
#include "ops/rows_util.h"

namespace ft::test::rows {
namespace {

constexpr float kEps = 1e-5f;

std::vector<Shape> norm_shapes() {
  return {{{"N", 1}, {"C", 1}},
          {{"N", 3}, {"C", 17}},
          {{"N", 5}, {"C", 100}},
          {{"N", 64}, {"C", 768}},
          {{"N", 37}, {"C", 1000}}};
}

Shape norm_bench() {
  return {{"N", 2048}, {"C", 768}};
}

// out (fp32 or bf16) and rstd from x and weight.
class RmsNormForward final : public OpCase {
 public:
  explicit RmsNormForward(bool bf16) : bf16_(bf16) {}
  std::vector<Shape> test_shapes() const override { return norm_shapes(); }
  Shape bench_shape() const override { return norm_bench(); }
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    c.in_f32("x", s["N"] * s["C"], seed + 21, -2.0f, 2.0f);
    c.in_f32("weight", s["C"], seed + 22, 0.5f, 1.5f);
    if (bf16_)
      c.out_bf16("out", s["N"] * s["C"], Tol::bf16());
    else
      c.out_f32("out", s["N"] * s["C"], Tol::close(2e-6, 0, 1e-7));
    c.out_f32("rstd", s["N"], Tol::close(2e-6, 0));
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    if (bf16_)
      ops.rmsnorm_forward_bf16(ctx, c.bf16("out"), c.f32("rstd"), c.f32("x"), c.f32("weight"), c["N"], c["C"], kEps);
    else
      ops.rmsnorm_forward(ctx, c.f32("out"), c.f32("rstd"), c.f32("x"), c.f32("weight"), c["N"], c["C"], kEps);
  }
  Cost cost(const Shape& s) const override {
    const double NC = s["N"] * s["C"];
    return {NC * (kF32Bytes + (bf16_ ? kBf16Bytes : kF32Bytes)) + kF32Bytes * (s["C"] + s["N"]), 4 * NC};
  }

 private:
  bool bf16_;
};

// dx (written) and dweight (accumulated) of Σ dout ∘ rmsnorm(x, weight) (+ Σ dres ∘ x when the
// shape's res = 1: the residual stream's gradient added in the same pass).
class RmsNormBackward final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override {
    std::vector<Shape> out;
    for (const Shape& s : norm_shapes())
      for (int64_t res : {0, 1}) out.push_back(s.with("res", res));
    return out;
  }
  Shape bench_shape() const override { return norm_bench().with("res", 1); }
  Case make(const Shape& s, uint64_t seed) const override {
    const int64_t N = s["N"], C = s["C"];
    Case c(s);
    const float* x = c.in_f32("x", N * C, seed + 21, -2.0f, 2.0f);
    const float* w = c.in_f32("weight", C, seed + 22, 0.5f, 1.5f);
    const float* dout = c.in_f32("dout", N * C, seed + 23);
    c.in_f32("dres", N * C, seed + 25);
    std::vector<float> out(static_cast<size_t>(N * C)), rstd(static_cast<size_t>(N));
    ref::rmsnorm_forward(cpu_context(), out.data(), rstd.data(), x, w, N, C, kEps);
    c.in_f32("rstd", rstd);
    // dx = r dy w − x r³/C Σ dy w x cancels when C is small: the tolerance scales with the terms.
    const double term = max_abs_of(rstd.data(), rstd.size()) * max_abs_of(dout, N * C) * max_abs_of(w, C);
    c.out_f32("dx", N * C, Tol::close(1e-5, 1e-6 * term));
    // dweight sums N rows in another order: the tolerance grows with N.
    c.inout_f32("dweight", C, seed + 24, Tol::close(1e-5, 0, 1e-6 * static_cast<double>(N)));
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.rmsnorm_backward(ctx, c.f32("dx"), c.f32("dweight"), c.f32("dout"), c["res"] ? c.f32("dres") : nullptr,
                         c.f32("x"), c.f32("weight"), c.f32("rstd"), c["N"], c["C"]);
  }
  Cost cost(const Shape& s) const override {
    const double NC = s["N"] * s["C"];
    return {(3 + s["res"]) * kF32Bytes * NC + kF32Bytes * (2 * s["C"] + s["N"]), 8 * NC};
  }

  std::vector<GradOf> grads() const override { return {{"dx", "x", false}, {"dweight", "weight", true}}; }
  std::vector<Shape> grad_shapes() const override {
    return {{{"N", 3}, {"C", 19}, {"res", 0}}, {{"N", 3}, {"C", 19}, {"res", 1}}};
  }
  double loss64(const Case& c, const Inputs64& in) const override {
    const int64_t N = c["N"], C = c["C"];
    std::vector<double> out(static_cast<size_t>(N * C)), rstd(static_cast<size_t>(N));
    ref_impl::rmsnorm_forward(out.data(), rstd.data(), in64(in, "x").data(), in64(in, "weight").data(), N, C,
                              static_cast<double>(kEps));
    return dot64(in64(in, "dout"), out) + (c["res"] ? dot64(in64(in, "dres"), in64(in, "x")) : 0.0);
  }
  std::map<std::string, std::vector<double>> backward64(const Case& c, const Inputs64& in) const override {
    const int64_t N = c["N"], C = c["C"];
    const auto &x = in64(in, "x"), &w = in64(in, "weight");
    std::vector<double> out(static_cast<size_t>(N * C)), rstd(static_cast<size_t>(N));
    ref_impl::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, static_cast<double>(kEps));
    std::vector<double> dx(static_cast<size_t>(N * C)), dw(static_cast<size_t>(C), 0.0);
    ref_impl::rmsnorm_backward(dx.data(), dw.data(), in64(in, "dout").data(), x.data(), w.data(), rstd.data(), N, C);
    if (c["res"])
      for (size_t i = 0; i < dx.size(); ++i) dx[i] += in64(in, "dres")[i];
    return {{"dx", dx}, {"dweight", dw}};
  }
};

}  // namespace

const OpCase& rmsnorm_forward() {
  static const RmsNormForward row(false);
  return row;
}
const OpCase& rmsnorm_forward_bf16() {
  static const RmsNormForward row(true);
  return row;
}
const OpCase& rmsnorm_backward() {
  static const RmsNormBackward row;
  return row;
}

}  // namespace ft::test::rows

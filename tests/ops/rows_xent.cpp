// Rows: xent_forward, xent_backward, xent_backward_bf16. Targets in range, ignored (-1, -5) and of
// another vocab shard (>= V) in every case of more than two rows.
#include <algorithm>

#include "kernels/ref/ref_impl.h"
#include "ops/op_cases.h"
#include "ops/rows_util.h"

namespace ft::test::rows {
namespace {

constexpr float kScale = 0.37f;

std::vector<Shape> xent_shapes() {
  return {{{"N", 1}, {"V", 1}},
          {{"N", 4}, {"V", 17}},
          {{"N", 9}, {"V", 1000}},
          {{"N", 8}, {"V", 32000}},
          {{"N", 3}, {"V", 2049}}};
}

// One chunk of the loss: 256 tokens of a 32000-token vocabulary.
Shape xent_bench() {
  return {{"N", 256}, {"V", 32000}};
}

std::vector<int32_t> targets(const Shape& s, uint64_t seed) {
  const int64_t N = s["N"], V = s["V"];
  std::vector<int32_t> t = random_ints(N, 0, static_cast<int32_t>(V), seed);
  for (int64_t n = 0; n < N; ++n) {
    if (n % 4 == 1) t[static_cast<size_t>(n)] = -1;
    if (n % 4 == 2) t[static_cast<size_t>(n)] = static_cast<int32_t>(V + n);  // another shard's
    if (n % 7 == 5) t[static_cast<size_t>(n)] = -5;
  }
  return t;
}

class XentForward final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override { return xent_shapes(); }
  Shape bench_shape() const override { return xent_bench(); }
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    c.in_f32("logits", s["N"] * s["V"], seed + 51, -8.0f, 8.0f);
    c.in_i32("targets", targets(s, seed + 52));
    c.out_f32("loss", s["N"], Tol::close(1e-6, 1e-6));
    c.out_f32("lse", s["N"], Tol::close(1e-6, 1e-6));
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.xent_forward(ctx, c.f32("loss"), c.f32("lse"), c.f32("logits"), c.i32("targets"), c["N"], c["V"]);
  }
  Cost cost(const Shape& s) const override { return {kF32Bytes * s["N"] * (s["V"] + 3), 4.0 * s["N"] * s["V"]}; }
};

// dlogits of scale · Σ over rows with a target >= 0 of (lse − the target's logit when it is in this
// shard): the loss for own targets, the shard's share of the log-sum-exp for other shards'.
class XentBackward final : public OpCase {
 public:
  explicit XentBackward(bool bf16) : bf16_(bf16) {}
  // And rows of 4-float groups whose logits and dlogits start off a 16-byte boundary (the scalar path).
  std::vector<Shape> test_shapes() const override {
    std::vector<Shape> v = xent_shapes();
    v.push_back({{"N", 5}, {"V", 1000}, {"off", 1}});
    return v;
  }
  Shape bench_shape() const override { return xent_bench(); }
  Case make(const Shape& s, uint64_t seed) const override {
    const int64_t N = s["N"], V = s["V"], o = offset_of(s);
    Case c(s);
    const float* logits = c.in_f32("logits", N * V + o, seed + 51, -8.0f, 8.0f) + o;
    const int32_t* t = c.in_i32("targets", targets(s, seed + 52));
    std::vector<float> loss(static_cast<size_t>(N)), lse(static_cast<size_t>(N));
    ref::xent_forward(cpu_context(), loss.data(), lse.data(), logits, t, N, V);
    c.in_f32("lse", lse);
    if (bf16_)
      std::fill_n(c.out_bf16("dlogits", N * V + o, Tol::bf16()), o, uint16_t{0});  // not the op's
    else
      std::fill_n(c.out_f32("dlogits", N * V + o, Tol::close(2e-6, 1e-9)), o, 0.0f);
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    const int64_t o = offset_of(c.shape());
    if (bf16_)
      ops.xent_backward_bf16(ctx, c.bf16("dlogits") + o, c.f32("logits") + o, c.f32("lse"), c.i32("targets"), c["N"],
                             c["V"], kScale);
    else
      ops.xent_backward(ctx, c.f32("dlogits") + o, c.f32("logits") + o, c.f32("lse"), c.i32("targets"), c["N"], c["V"],
                        kScale);
  }
  Cost cost(const Shape& s) const override {
    return {s["N"] * s["V"] * (kF32Bytes + (bf16_ ? kBf16Bytes : kF32Bytes)), 3.0 * s["N"] * s["V"]};
  }

  std::vector<GradOf> grads() const override { return {{"dlogits", "logits", false}}; }
  std::vector<Shape> grad_shapes() const override { return {{{"N", 6}, {"V", 11}}}; }
  double loss64(const Case& c, const Inputs64& in) const override {
    const int64_t N = c["N"], V = c["V"];
    const std::vector<double>& z = in64(in, "logits");
    const int32_t* t = c.i32("targets");
    std::vector<double> l(static_cast<size_t>(N)), lse(static_cast<size_t>(N));
    ref_impl::xent_forward(l.data(), lse.data(), z.data(), t, N, V);
    double sum = 0;
    for (int64_t n = 0; n < N; ++n) {
      if (t[n] < 0) continue;
      sum += lse[static_cast<size_t>(n)] - (t[n] < V ? z[static_cast<size_t>(n * V + t[n])] : 0.0);
    }
    return static_cast<double>(kScale) * sum;
  }
  std::map<std::string, std::vector<double>> backward64(const Case& c, const Inputs64& in) const override {
    const int64_t N = c["N"], V = c["V"];
    const std::vector<double>& z = in64(in, "logits");
    std::vector<double> l(static_cast<size_t>(N)), lse(static_cast<size_t>(N)), d(static_cast<size_t>(N * V));
    ref_impl::xent_forward(l.data(), lse.data(), z.data(), c.i32("targets"), N, V);
    ref_impl::xent_backward(d.data(), z.data(), lse.data(), c.i32("targets"), N, V, static_cast<double>(kScale));
    return {{"dlogits", d}};
  }
  Tol grad_tol() const override { return bf16_ ? Tol::close(4e-3, 0, 1e-5) : OpCase::grad_tol(); }

 private:
  bool bf16_;
};

}  // namespace

const OpCase& xent_forward() {
  static const XentForward row;
  return row;
}
const OpCase& xent_backward() {
  static const XentBackward row(false);
  return row;
}
const OpCase& xent_backward_bf16() {
  static const XentBackward row(true);
  return row;
}

}  // namespace ft::test::rows

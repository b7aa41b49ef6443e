// Rows: swiglu_forward, swiglu_forward_bf16, swiglu_backward, swiglu_backward_bf16. Gates in
// [-6, 6): both tails of the sigmoid. The bf16 forms read and write bf16 and are held to one bf16
// step of the reference; that they are exactly the fp32 op on the widened inputs, rounded, is
// tests/unit/kernels_test.cpp.
#include <algorithm>

#include "kernels/ref/ref_impl.h"
#include "ops/op_cases.h"
#include "ops/rows_util.h"

namespace ft::test::rows {
namespace {

// F 24: 16-byte vectors (4 floats, 8 bf16); with "off" every buffer starts off a 16-byte boundary
// (the scalar path).
std::vector<Shape> swiglu_shapes() {
  return {{{"N", 1}, {"F", 1}},
          {{"N", 3}, {"F", 17}},
          {{"N", 5}, {"F", 33}},
          {{"N", 3}, {"F", 24}},
          {{"N", 2}, {"F", 24}, {"off", 1}},
          {{"N", 64}, {"F", 1000}}};
}

Shape swiglu_bench() {
  return {{"N", 2048}, {"F", 2048}};
}

class SwiGluForward final : public OpCase {
 public:
  explicit SwiGluForward(bool bf16) : bf16_(bf16) {}
  std::vector<Shape> test_shapes() const override { return swiglu_shapes(); }
  Shape bench_shape() const override { return swiglu_bench(); }
  Case make(const Shape& s, uint64_t seed) const override {
    const int64_t o = offset_of(s);
    Case c(s);
    if (bf16_) {
      c.in_bf16("gate_up", random_floats(s["N"] * 2 * s["F"] + o, seed + 41, -6.0f, 6.0f));
      std::fill_n(c.out_bf16("out", s["N"] * s["F"] + o, Tol::bf16()), o, uint16_t{0});  // not the op's
    } else {
      c.in_f32("gate_up", s["N"] * 2 * s["F"] + o, seed + 41, -6.0f, 6.0f);
      std::fill_n(c.out_f32("out", s["N"] * s["F"] + o, Tol::close(1e-6, 1e-7)), o, 0.0f);
    }
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    const int64_t o = offset_of(c.shape());
    if (bf16_)
      ops.swiglu_forward_bf16(ctx, c.bf16("out") + o, c.bf16("gate_up") + o, c["N"], c["F"]);
    else
      ops.swiglu_forward(ctx, c.f32("out") + o, c.f32("gate_up") + o, c["N"], c["F"]);
  }
  Cost cost(const Shape& s) const override {
    const double NF = s["N"] * s["F"];
    return {NF * 3 * (bf16_ ? kBf16Bytes : kF32Bytes), 5 * NF};
  }

 private:
  bool bf16_;
};

// dgate_up of Σ dout ∘ swiglu(gate_up).
class SwiGluBackward final : public OpCase {
 public:
  explicit SwiGluBackward(bool bf16) : bf16_(bf16) {}
  std::vector<Shape> test_shapes() const override { return swiglu_shapes(); }
  Shape bench_shape() const override { return swiglu_bench(); }
  Case make(const Shape& s, uint64_t seed) const override {
    const int64_t o = offset_of(s);
    Case c(s);
    if (bf16_) {
      c.in_bf16("gate_up", random_floats(s["N"] * 2 * s["F"] + o, seed + 41, -6.0f, 6.0f));
      c.in_bf16("dout", random_floats(s["N"] * s["F"] + o, seed + 42));
      std::fill_n(c.out_bf16("dgate_up", s["N"] * 2 * s["F"] + o, Tol::bf16()), o, uint16_t{0});
    } else {
      c.in_f32("gate_up", s["N"] * 2 * s["F"] + o, seed + 41, -6.0f, 6.0f);
      c.in_f32("dout", s["N"] * s["F"] + o, seed + 42);
      std::fill_n(c.out_f32("dgate_up", s["N"] * 2 * s["F"] + o, Tol::close(2e-6, 1e-7)), o, 0.0f);
    }
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    const int64_t o = offset_of(c.shape());
    if (bf16_)
      ops.swiglu_backward_bf16(ctx, c.bf16("dgate_up") + o, c.bf16("dout") + o, c.bf16("gate_up") + o, c["N"], c["F"]);
    else
      ops.swiglu_backward(ctx, c.f32("dgate_up") + o, c.f32("dout") + o, c.f32("gate_up") + o, c["N"], c["F"]);
  }
  Cost cost(const Shape& s) const override {
    const double NF = s["N"] * s["F"];
    return {NF * 5 * (bf16_ ? kBf16Bytes : kF32Bytes), 12 * NF};
  }

  std::vector<GradOf> grads() const override { return {{"dgate_up", "gate_up", false}}; }
  std::vector<Shape> grad_shapes() const override { return {{{"N", 3}, {"F", 17}}}; }
  double loss64(const Case& c, const Inputs64& in) const override {
    std::vector<double> out(static_cast<size_t>(c["N"] * c["F"]));
    ref_impl::swiglu_forward(out.data(), in64(in, "gate_up").data(), c["N"], c["F"]);
    return dot64(in64(in, "dout"), out);
  }
  std::map<std::string, std::vector<double>> backward64(const Case& c, const Inputs64& in) const override {
    std::vector<double> d(static_cast<size_t>(c["N"] * 2 * c["F"]));
    ref_impl::swiglu_backward(d.data(), in64(in, "dout").data(), in64(in, "gate_up").data(), c["N"], c["F"]);
    return {{"dgate_up", d}};
  }
  // bf16 output: one rounding (2^-9 relative) on top of the fp32 error.
  Tol grad_tol() const override { return bf16_ ? Tol::close(4e-3, 0, 1e-5) : OpCase::grad_tol(); }

 private:
  bool bf16_;
};

}  // namespace

const OpCase& swiglu_forward() {
  static const SwiGluForward row(false);
  return row;
}
const OpCase& swiglu_forward_bf16() {
  static const SwiGluForward row(true);
  return row;
}
const OpCase& swiglu_backward() {
  static const SwiGluBackward row(false);
  return row;
}
const OpCase& swiglu_backward_bf16() {
  static const SwiGluBackward row(true);
  return row;
}

}  // namespace ft::test::rows

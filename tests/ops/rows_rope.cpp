// Rows: rope_forward, rope_backward (in place on the query and key heads), rope_tables, and the
// bf16 forms rope_forward_bf16 and rope_backward_bf16 (bf16 in and out), held
// to one bf16 step of the reference's rounded result.
#include "kernels/ref/ref_impl.h"
#include "ops/op_cases.h"
#include "ops/rows_util.h"

namespace ft::test::rows {
namespace {

constexpr float kTheta = 10000.0f;

std::vector<Shape> rope_shapes() {
  return {{{"B", 1}, {"T", 1}, {"H", 1}, {"Hkv", 1}, {"D", 2}, {"pos0", 0}},
          {{"B", 2}, {"T", 5}, {"H", 4}, {"Hkv", 2}, {"D", 6}, {"pos0", 3}},
          {{"B", 1}, {"T", 3}, {"H", 2}, {"Hkv", 1}, {"D", 34}, {"pos0", 0}},  // half = 17
          {{"B", 2}, {"T", 16}, {"H", 4}, {"Hkv", 2}, {"D", 64}, {"pos0", 7}},
          {{"B", 2}, {"T", 40}, {"H", 4}, {"Hkv", 4}, {"D", 64}, {"pos0", 0}}};  // above the threading cut
}

Shape rope_bench() {
  return {{"B", 4}, {"T", 512}, {"H", 12}, {"Hkv", 12}, {"D", 64}, {"pos0", 0}};
}

int64_t qkv_size(const Shape& s) {
  return s["B"] * s["T"] * (s["H"] + 2 * s["Hkv"]) * s["D"];
}

// The cos and sin tables the op reads, from the reference.
void add_tables(Case& c) {
  const int64_t max_pos = c["pos0"] + c["T"] + 3, half = c["D"] / 2;
  std::vector<float> cos(static_cast<size_t>(max_pos * half)), sin(cos.size());
  ref::rope_tables(cpu_context(), cos.data(), sin.data(), max_pos, c["D"], kTheta);
  c.in_f32("cos", cos);
  c.in_f32("sin", sin);
}

// q and k heads read and written, their table rows read.
Cost rope_cost(const Shape& s) {
  const double qk = s["B"] * s["T"] * (s["H"] + s["Hkv"]) * s["D"];
  return {2 * kF32Bytes * qk + kF32Bytes * s["T"] * s["D"], 3 * qk};
}

// The tables in double, as the float64 gradient checks need them.
std::vector<double> tables64(const Case& c, bool cos) {
  const int64_t max_pos = c["pos0"] + c["T"] + 3, half = c["D"] / 2;
  std::vector<double> t(static_cast<size_t>(max_pos * half)), other(t.size());
  ref_impl::rope_tables(cos ? t.data() : other.data(), cos ? other.data() : t.data(), max_pos, c["D"],
                        static_cast<double>(kTheta));
  return t;
}

// The backward rows' gradient check: loss = Σ w ∘ rope(qkv) in double, w = "dqkv" (the gradient
// the backward starts from), and its gradient, the inverse rotation of w.
std::vector<Shape> rope_grad_shapes() {
  return {{{"B", 2}, {"T", 3}, {"H", 2}, {"Hkv", 1}, {"D", 6}, {"pos0", 2}}};
}
double rope_loss64(const Case& c, const Inputs64& in) {
  std::vector<double> out = in64(in, "qkv");
  const std::vector<double> cos = tables64(c, true), sin = tables64(c, false);
  ref_impl::rope_apply(out.data(), cos.data(), sin.data(), c["B"], c["T"], c["H"], c["Hkv"], c["D"], c["pos0"], 1.0);
  return dot64(in64(in, "dqkv"), out);
}
std::vector<double> rope_grad64(const Case& c, const Inputs64& in) {
  std::vector<double> d = in64(in, "dqkv");
  const std::vector<double> cos = tables64(c, true), sin = tables64(c, false);
  ref_impl::rope_apply(d.data(), cos.data(), sin.data(), c["B"], c["T"], c["H"], c["Hkv"], c["D"], c["pos0"], -1.0);
  return d;
}

class RopeForward final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override { return rope_shapes(); }
  Shape bench_shape() const override { return rope_bench(); }
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    add_tables(c);
    c.inout_f32("qkv", qkv_size(s), seed + 31, Tol::close(1e-6, 1e-7));
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.rope_forward(ctx, c.f32("qkv"), c.f32("cos"), c.f32("sin"), c["B"], c["T"], c["H"], c["Hkv"], c["D"],
                     c["pos0"]);
  }
  Cost cost(const Shape& s) const override { return rope_cost(s); }
};

// dqkv (in place) = d/dqkv of Σ w ∘ rope(qkv), with w the gradient it starts as.
class RopeBackward final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override { return rope_shapes(); }
  Shape bench_shape() const override { return rope_bench(); }
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    add_tables(c);
    c.in_f32("qkv", qkv_size(s), seed + 33);  // the forward's input (gradient check)
    c.inout_f32("dqkv", qkv_size(s), seed + 32, Tol::close(1e-6, 1e-7));
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.rope_backward(ctx, c.f32("dqkv"), c.f32("cos"), c.f32("sin"), c["B"], c["T"], c["H"], c["Hkv"], c["D"],
                      c["pos0"]);
  }
  Cost cost(const Shape& s) const override { return rope_cost(s); }

  std::vector<GradOf> grads() const override { return {{"dqkv", "qkv", false}}; }
  std::vector<Shape> grad_shapes() const override { return rope_grad_shapes(); }
  double loss64(const Case& c, const Inputs64& in) const override { return rope_loss64(c, in); }
  std::map<std::string, std::vector<double>> backward64(const Case& c, const Inputs64& in) const override {
    return {{"dqkv", rope_grad64(c, in)}};
  }
};

class RopeTables final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override {
    return {{{"max_pos", 1}, {"D", 2}},
            {{"max_pos", 11}, {"D", 6}},
            {{"max_pos", 37}, {"D", 34}},
            {{"max_pos", 300}, {"D", 64}}};
  }
  Shape bench_shape() const override { return {{"max_pos", 2048}, {"D", 64}}; }
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    c.out_f32("cos", s["max_pos"] * s["D"] / 2, Tol::exact());
    c.out_f32("sin", s["max_pos"] * s["D"] / 2, Tol::exact());
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.rope_tables(ctx, c.f32("cos"), c.f32("sin"), c["max_pos"], c["D"], kTheta);
  }
  Cost cost(const Shape& s) const override { return {kF32Bytes * s["max_pos"] * s["D"], 0}; }
};

// The bf16 attention's q, k, v from the QKV GEMM's bf16 output: every head read and written in
// bf16 (out of place here, so the value heads' copy is checked; the model runs it in place).
class RopeForwardBf16 final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override { return rope_shapes(); }
  Shape bench_shape() const override { return rope_bench(); }
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    add_tables(c);
    c.in_bf16("qkv", random_floats(qkv_size(s), seed + 34));
    c.out_bf16("qkv16", qkv_size(s), Tol::bf16());
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.rope_forward_bf16(ctx, c.bf16("qkv16"), c.bf16("qkv"), c.f32("cos"), c.f32("sin"), c["B"], c["T"], c["H"],
                          c["Hkv"], c["D"], c["pos0"]);
  }
  Cost cost(const Shape& s) const override {
    return {2 * kBf16Bytes * qkv_size(s) + kF32Bytes * s["T"] * s["D"], 3.0 * qkv_size(s)};
  }
};

// Out of place here (the model runs it in place: rows compare what an output buffer receives).
class RopeBackwardBf16 final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override { return rope_shapes(); }
  Shape bench_shape() const override { return rope_bench(); }
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    add_tables(c);
    c.in_f32("qkv", qkv_size(s), seed + 36);  // the forward's input (gradient check)
    c.in_bf16("dqkv", random_floats(qkv_size(s), seed + 35));
    c.out_bf16("dqkv16", qkv_size(s), Tol::bf16());
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.rope_backward_bf16(ctx, c.bf16("dqkv16"), c.bf16("dqkv"), c.f32("cos"), c.f32("sin"), c["B"], c["T"], c["H"],
                           c["Hkv"], c["D"], c["pos0"]);
  }
  Cost cost(const Shape& s) const override {
    return {2 * kBf16Bytes * qkv_size(s) + kF32Bytes * s["T"] * s["D"], 3.0 * qkv_size(s)};
  }

  std::vector<GradOf> grads() const override { return {{"dqkv16", "qkv", false}}; }
  std::vector<Shape> grad_shapes() const override { return rope_grad_shapes(); }
  double loss64(const Case& c, const Inputs64& in) const override { return rope_loss64(c, in); }
  std::map<std::string, std::vector<double>> backward64(const Case& c, const Inputs64& in) const override {
    return {{"dqkv16", rope_grad64(c, in)}};
  }
  // One bf16 step of each value.
  Tol grad_tol() const override { return Tol::close(8e-3, 1e-6); }
};

}  // namespace

const OpCase& rope_forward_bf16() {
  static const RopeForwardBf16 row;
  return row;
}
const OpCase& rope_backward_bf16() {
  static const RopeBackwardBf16 row;
  return row;
}
const OpCase& rope_forward() {
  static const RopeForward row;
  return row;
}
const OpCase& rope_backward() {
  static const RopeBackward row;
  return row;
}
const OpCase& rope_tables() {
  static const RopeTables row;
  return row;
}

}  // namespace ft::test::rows

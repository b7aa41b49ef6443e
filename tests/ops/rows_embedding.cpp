// Rows: embedding_forward, embedding_backward. Whole tables and vocab-parallel shards [v0, v0 + V)
// with tokens outside the shard; a copy and same-order sums: exact.
#include "kernels/ref/ref_impl.h"
#include "ops/op_cases.h"
#include "ops/rows_util.h"

namespace ft::test::rows {
namespace {

std::vector<Shape> embedding_shapes() {
  return {{{"N", 1}, {"C", 1}, {"v0", 0}, {"V", 1}, {"vocab", 1}},
          {{"N", 7}, {"C", 33}, {"v0", 0}, {"V", 5}, {"vocab", 5}},
          {{"N", 9}, {"C", 20}, {"v0", 3}, {"V", 4}, {"vocab", 10}},        // shard [3, 7)
          {{"N", 64}, {"C", 768}, {"v0", 100}, {"V", 50}, {"vocab", 200}},  // shard, many repeats
          {{"N", 300}, {"C", 100}, {"v0", 0}, {"V", 7}, {"vocab", 7}}};     // N·C above the threading cut
}

Shape embedding_bench() {
  return {{"N", 2048}, {"C", 768}, {"v0", 0}, {"V", 32000}, {"vocab", 32000}};
}

class EmbeddingForward final : public OpCase {
 public:
  // And rows of 4-float groups whose table and output start off a 16-byte boundary (the scalar path).
  std::vector<Shape> test_shapes() const override {
    std::vector<Shape> v = embedding_shapes();
    v.push_back({{"N", 9}, {"C", 20}, {"v0", 3}, {"V", 4}, {"vocab", 10}, {"off", 1}});
    return v;
  }
  Shape bench_shape() const override { return embedding_bench(); }
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    c.in_i32("tokens", random_ints(s["N"], 0, static_cast<int32_t>(s["vocab"]), seed + 10));
    c.in_f32("table", s["V"] * s["C"] + offset_of(s), seed + 11);
    c.out_f32("out", s["N"] * s["C"] + offset_of(s), Tol::exact());
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    const int64_t o = offset_of(c.shape());
    ops.embedding_forward(ctx, c.f32("out") + o, c.i32("tokens"), c.f32("table") + o, c["N"], c["C"], c["v0"], c["V"]);
  }
  Cost cost(const Shape& s) const override { return {(2 * kF32Bytes * s["C"] + 4) * s["N"], 0}; }
};

// d/dtable of Σ dout ∘ embedding(table): dout's rows summed into the rows of their tokens.
class EmbeddingBackward final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override { return embedding_shapes(); }
  Shape bench_shape() const override { return embedding_bench(); }
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    c.in_i32("tokens", random_ints(s["N"], 0, static_cast<int32_t>(s["vocab"]), seed + 12));
    c.in_f32("dout", s["N"] * s["C"], seed + 13);
    c.in_f32("table", s["V"] * s["C"], seed + 14);                    // the forward's input (gradient check)
    c.inout_f32("dtable", s["V"] * s["C"], seed + 15, Tol::exact());  // accumulates: starts non-zero
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.embedding_backward(ctx, c.f32("dtable"), c.f32("dout"), c.i32("tokens"), c["N"], c["C"], c["v0"], c["V"]);
  }
  Cost cost(const Shape& s) const override { return {(3 * kF32Bytes * s["C"] + 4) * s["N"], 1.0 * s["N"] * s["C"]}; }

  std::vector<GradOf> grads() const override { return {{"dtable", "table", true}}; }
  std::vector<Shape> grad_shapes() const override {
    return {{{"N", 9}, {"C", 5}, {"v0", 2}, {"V", 4}, {"vocab", 8}}};  // repeats, tokens outside [2, 6)
  }
  double loss64(const Case& c, const Inputs64& in) const override {
    std::vector<double> out(static_cast<size_t>(c["N"] * c["C"]));
    ref_impl::embedding_forward(out.data(), c.i32("tokens"), in64(in, "table").data(), c["N"], c["C"], c["v0"], c["V"]);
    return dot64(in64(in, "dout"), out);
  }
  std::map<std::string, std::vector<double>> backward64(const Case& c, const Inputs64& in) const override {
    std::vector<double> d(static_cast<size_t>(c["V"] * c["C"]), 0.0);
    ref_impl::embedding_backward(d.data(), in64(in, "dout").data(), c.i32("tokens"), c["N"], c["C"], c["v0"], c["V"]);
    return {{"dtable", d}};
  }
};

}  // namespace

const OpCase& embedding_forward() {
  static const EmbeddingForward row;
  return row;
}
const OpCase& embedding_backward() {
  static const EmbeddingBackward row;
  return row;
}

}  // namespace ft::test::rows

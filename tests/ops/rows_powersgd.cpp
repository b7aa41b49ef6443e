// Rows: gram_schmidt, powersgd_error_feedback — PowerSGD's steps between its all-reduces. Factor
// shapes of one to five columns (PowerSGD's rank) over rows on both sides of the threading cut;
// both are exact: the backends run the reference's arithmetic (Gram–Schmidt's dot products as
// sequential double sums).
#include <cmath>

#include "ops/op_cases.h"
#include "ops/rows_util.h"

namespace ft::test::rows {
namespace {

class GramSchmidt final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override {
    return {{{"n", 1}, {"r", 1}},
            {{"n", 5}, {"r", 5}},
            {{"n", 17}, {"r", 3}},
            {{"n", 1000}, {"r", 4}},
            {{"n", 40000}, {"r", 2}}};
  }
  Shape bench_shape() const override { return {{"n", 2048}, {"r", 4}}; }  // P of a (2048, 768) gradient
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    c.inout_f32("P", s["n"] * s["r"], seed + 91, Tol::exact());
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.gram_schmidt(ctx, c.f32("P"), c["n"], c["r"]);
  }
  Cost cost(const Shape& s) const override {
    const double r = static_cast<double>(s["r"]);
    return {2 * kF32Bytes * s["n"] * s["r"], 4.0 * s["n"] * r * (r + 1) / 2};
  }
  // Beyond the reference: the columns come out orthonormal.
  std::string compare(const Case& before, const Case& got, const Case& want) const override {
    std::string e = OpCase::compare(before, got, want);
    const int64_t n = got["n"], r = got["r"];
    const float* P = got.f32("P");
    for (int64_t j = 0; j < r && e.empty(); ++j) {
      for (int64_t k = 0; k <= j; ++k) {
        double dot = 0;
        for (int64_t i = 0; i < n; ++i) dot += static_cast<double>(P[i * r + j]) * P[i * r + k];
        // n = 1 leaves one direction: later columns are (numerically) zero.
        const double want_dot = j == k && j < n ? 1.0 : 0.0;
        if (std::fabs(dot - want_dot) > 1e-4)
          return "columns " + std::to_string(j) + ", " + std::to_string(k) + ": dot " + std::to_string(dot);
      }
    }
    return e;
  }
};

class ErrorFeedback final : public OpCase {
 public:
  // Below and above the 4-wide vectors, and off a 16-byte boundary (the scalar path).
  std::vector<Shape> test_shapes() const override {
    return {{{"n", 1}}, {{"n", 17}}, {{"n", 1000}}, {{"n", 1001}, {"off", 1}}, {{"n", 100003}}};
  }
  Shape bench_shape() const override { return {{"n", 2048 * 768}}; }
  Case make(const Shape& s, uint64_t seed) const override {
    const int64_t n = s["n"] + offset_of(s);
    Case c(s);
    c.out_f32("error", n, Tol::exact());
    c.inout_f32("grad", n, seed + 92, Tol::exact());
    c.in_f32("approx", n, seed + 93, -3.0f, 3.0f);
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    const int64_t o = offset_of(c.shape());
    ops.powersgd_error_feedback(ctx, c.f32("error") + o, c.f32("grad") + o, c.f32("approx") + o, 3.0f, c["n"]);
  }
  Cost cost(const Shape& s) const override { return {4 * kF32Bytes * s["n"], 2.0 * s["n"]}; }
};

}  // namespace

const OpCase& gram_schmidt() {
  static const GramSchmidt row;
  return row;
}
const OpCase& powersgd_error_feedback() {
  static const ErrorFeedback row;
  return row;
}

}  // namespace ft::test::rows

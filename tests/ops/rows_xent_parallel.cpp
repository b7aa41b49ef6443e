// Rows: xent_shard_targets, xent_target_logit, xent_combine_max, xent_combine_sums,
// xent_combine_finish, xent_loss_from_rows — the vocab-parallel cross-entropy's per-row steps.
// Targets below, inside and above the rank's vocabulary rows, and ignored ones (-1, -100); row
// counts on both sides of the threading cut. Every step is exact: the backends run the
// reference's arithmetic row by row.
#include "ops/op_cases.h"
#include "ops/rows_util.h"

namespace ft::test::rows {
namespace {

std::vector<Shape> row_shapes() {
  return {{{"N", 1}, {"v0", 0}, {"V", 5}},
          {{"N", 17}, {"v0", 3}, {"V", 7}},
          {{"N", 1000}, {"v0", 100}, {"V", 250}},
          {{"N", 20000}, {"v0", 400}, {"V", 100}}};
}

// One chunk of tensor-parallel loss: 256 tokens, a rank's half of a 32000-token vocabulary.
Shape row_bench() {
  return {{"N", 256}, {"v0", 16000}, {"V", 16000}};
}

// Global targets over a vocabulary of 3 shards around this one, some ignored.
std::vector<int32_t> global_targets(const Shape& s, uint64_t seed) {
  const int64_t N = s["N"], v0 = s["v0"], V = s["V"];
  std::vector<int32_t> t = random_ints(N, 0, static_cast<int32_t>(v0 + 2 * V), seed);
  for (int64_t n = 0; n < N; n += 5) t[static_cast<size_t>(n)] = n % 2 ? -1 : -100;
  return t;
}

// A rank's targets as xent_shard_targets makes them: -1, [0, V) or V.
std::vector<int32_t> local_targets(const Shape& s, uint64_t seed) {
  std::vector<int32_t> t = random_ints(s["N"], -1, static_cast<int32_t>(s["V"] + 1), seed);
  return t;
}

class ShardTargets final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override { return row_shapes(); }
  Shape bench_shape() const override { return row_bench(); }
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    c.in_i32("targets", global_targets(s, seed + 71));
    c.out_i32("local", s["N"], Tol::exact());
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.xent_shard_targets(ctx, c.i32("local"), c.i32("targets"), c["N"], c["v0"], c["V"]);
  }
  Cost cost(const Shape& s) const override { return {2 * 4.0 * s["N"], 0}; }
};

class TargetLogit final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override { return row_shapes(); }
  Shape bench_shape() const override { return row_bench(); }
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    c.in_f32("logits", s["N"] * s["V"], seed + 72, -8.0f, 8.0f);
    c.in_i32("targets", local_targets(s, seed + 73));
    c.out_f32("target_logit", s["N"], Tol::exact());
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.xent_target_logit(ctx, c.f32("target_logit"), c.f32("logits"), c.i32("targets"), c["N"], c["V"]);
  }
  // The targets and one logit per row (a gather, not a sweep of the logits).
  Cost cost(const Shape& s) const override { return {3 * kF32Bytes * s["N"], 0}; }
};

class CombineMax final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override { return row_shapes(); }
  Shape bench_shape() const override { return row_bench(); }
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    c.in_f32("lse", s["N"], seed + 74, -5.0f, 12.0f);
    c.out_f64("row_max", s["N"], Tol::exact());
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.xent_combine_max(ctx, c.f64("row_max"), c.f32("lse"), c["N"]);
  }
  Cost cost(const Shape& s) const override { return {(kF32Bytes + 8) * s["N"], 0}; }
};

// row_max as the all-reduce leaves it: at least this rank's lse.
std::vector<double> row_max_over(const Case& c, int64_t N, uint64_t seed) {
  std::vector<float> up = random_floats(N, seed, 0.0f, 3.0f);
  std::vector<double> m(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) m[n] = static_cast<double>(c.f32("lse")[n]) + (n % 3 ? up[n] : 0.0f);
  return m;
}

class CombineSums final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override { return row_shapes(); }
  Shape bench_shape() const override { return row_bench(); }
  Case make(const Shape& s, uint64_t seed) const override {
    const int64_t N = s["N"];
    Case c(s);
    c.in_f32("lse", N, seed + 75, -5.0f, 12.0f);
    c.in_f32("target_logit", N, seed + 76, -8.0f, 8.0f);
    c.in_f64("row_max", row_max_over(c, N, seed + 77));
    c.out_f64("sums", 2 * N, Tol::exact());
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.xent_combine_sums(ctx, c.f64("sums"), c.f32("lse"), c.f32("target_logit"), c.f64("row_max"), c["N"]);
  }
  Cost cost(const Shape& s) const override { return {(2 * kF32Bytes + 3 * 8) * s["N"], 20.0 * s["N"]}; }
};

class CombineFinish final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override { return row_shapes(); }
  Shape bench_shape() const override { return row_bench(); }
  Case make(const Shape& s, uint64_t seed) const override {
    const int64_t N = s["N"];
    std::vector<float> m = random_floats(N, seed + 78, -5.0f, 12.0f), e = random_floats(N, seed + 79, 1.0f, 4.0f),
                       z = random_floats(N, seed + 80, -8.0f, 8.0f);
    std::vector<double> row_max(m.begin(), m.end()), sums(static_cast<size_t>(2 * N));
    for (int64_t n = 0; n < N; ++n) sums[n] = e[n], sums[N + n] = z[n];
    Case c(s);
    c.in_f64("row_max", row_max);
    c.in_f64("sums", sums);
    c.out_f32("lse", N, Tol::exact());
    c.out_f32("target_logit", N, Tol::exact());
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.xent_combine_finish(ctx, c.f32("lse"), c.f32("target_logit"), c.f64("row_max"), c.f64("sums"), c["N"]);
  }
  Cost cost(const Shape& s) const override { return {(2 * kF32Bytes + 3 * 8) * s["N"], 20.0 * s["N"]}; }
};

class LossFromRows final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override { return row_shapes(); }
  Shape bench_shape() const override { return row_bench(); }
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    c.in_f32("lse", s["N"], seed + 81, -5.0f, 12.0f);
    c.in_f32("target_logit", s["N"], seed + 82, -8.0f, 8.0f);
    c.in_i32("targets", global_targets(s, seed + 83));
    c.out_f32("loss", s["N"], Tol::exact());
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.xent_loss_from_rows(ctx, c.f32("loss"), c.f32("lse"), c.f32("target_logit"), c.i32("targets"), c["N"]);
  }
  Cost cost(const Shape& s) const override { return {4 * kF32Bytes * s["N"], 1.0 * s["N"]}; }
};

}  // namespace

const OpCase& xent_shard_targets() {
  static const ShardTargets row;
  return row;
}
const OpCase& xent_target_logit() {
  static const TargetLogit row;
  return row;
}
const OpCase& xent_combine_max() {
  static const CombineMax row;
  return row;
}
const OpCase& xent_combine_sums() {
  static const CombineSums row;
  return row;
}
const OpCase& xent_combine_finish() {
  static const CombineFinish row;
  return row;
}
const OpCase& xent_loss_from_rows() {
  static const LossFromRows row;
  return row;
}

}  // namespace ft::test::rows

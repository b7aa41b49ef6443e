// Rows: matmul, matmul_bf16, matmul_bf16_add, matmul_bf16_rounded. Every transpose, beta 0 and 1, fp32 / bf16 / fp16,
// odd shapes; the outputs are held to the forward error bound of a K-term dot product, not to a fixed tolerance.
#include <array>
#include <cmath>
#include <sstream>

#include "kernels/ref/ref_impl.h"
#include "ops/op_cases.h"
#include "ops/rows_util.h"
#include "tensor/dtype.h"

namespace ft::test::rows {
namespace {

float rounded(float x, Precision p) {
  if (p == Precision::kBF16) return bf16_to_f32(f32_to_bf16(x));
  if (p == Precision::kF16) return f16_to_f32(f32_to_f16(x));
  return x;
}

// |C − C_exact| <= 2 (K + 2) u (|op(A)| |op(B)| + |beta C0|) element-wise, u = 2^-24, with A and B
// as the GEMM multiplies them (rounded to its input type). A wrong transpose or a dropped beta is
// O(1) off, far outside.
// rel_slack: a rounding of each output on top (matmul_bf16_rounded: 2^-7 of |C|, a bf16 step).
std::string gemm_bound(const std::vector<double>& absA, const std::vector<double>& absB, const Buffer& C0,
                       const Buffer& got, const Buffer& want, const Shape& s, double rel_slack = 0) {
  const int64_t M = s["M"], N = s["N"], K = s["K"];
  const double beta = static_cast<double>(s["beta"]);
  std::vector<double> bound(static_cast<size_t>(M * N));
  ref_impl::matmul(bound.data(), absA.data(), absB.data(), M, N, K, s["trans_a"] != 0, s["trans_b"] != 0, 0.0);
  const double u = 0x1p-24;
  for (int64_t i = 0; i < M * N; ++i) {
    const double allowed = 2.0 * static_cast<double>(K + 2) * u * (bound[i] + std::fabs(beta * C0.at(i))) +
                           rel_slack * std::fabs(want.at(i)) + 1e-30;
    const double err = std::fabs(got.at(i) - want.at(i));
    if (!(err <= allowed)) {
      std::ostringstream os;
      os.precision(9);
      os << "C[" << i / N << ", " << i % N << "] = " << got.at(i) << ", want " << want.at(i) << " (error " << err
         << " > bound " << allowed << ")";
      return os.str();
    }
  }
  return "";
}

std::vector<Shape> transposes_and_betas(std::initializer_list<std::array<int64_t, 3>> sizes,
                                        std::initializer_list<int64_t> precisions) {
  std::vector<Shape> out;
  for (auto [M, N, K] : sizes)
    for (int64_t p : precisions)
      for (int64_t t = 0; t < 8; ++t)
        out.push_back({{"M", M},
                       {"N", N},
                       {"K", K},
                       {"trans_a", t & 1},
                       {"trans_b", (t >> 1) & 1},
                       {"beta", t >> 2},
                       {"prec", p}});
  return out;
}

// The bench: the query/key/value projection of a llama-125m micro-batch, y(2048, 2304) = x Wᵀ.
Shape qkv_projection(Precision p) {
  return {{"M", 2048}, {"N", 2304}, {"K", 768}, {"trans_a", 0}, {"trans_b", 1}, {"beta", 0}, {"prec", int64_t(p)}};
}

Cost gemm_cost(const Shape& s, double operand_bytes) {
  const double M = s["M"], N = s["N"], K = s["K"];
  return {operand_bytes * (M * K + K * N) + kF32Bytes * M * N * (s["beta"] ? 2 : 1), 2 * M * N * K,
          static_cast<Precision>(s["prec"])};
}

class Matmul final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override {
    return transposes_and_betas({{1, 1, 1}, {7, 13, 5}, {33, 17, 65}, {128, 96, 64}, {67, 257, 129}}, {0, 1, 2});
  }
  Shape bench_shape() const override { return qkv_projection(Precision::kF32); }
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    c.in_f32("A", s["M"] * s["K"], seed + s["M"]);
    c.in_f32("B", s["K"] * s["N"], seed + 1 + s["N"]);
    c.inout_f32("C", s["M"] * s["N"], seed + 2, Tol::exact());  // compare(): the error bound
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.matmul(ctx, c.f32("C"), c.f32("A"), c.f32("B"), c["M"], c["N"], c["K"], c["trans_a"] != 0, c["trans_b"] != 0,
               static_cast<float>(c["beta"]), static_cast<Precision>(c["prec"]));
  }
  Cost cost(const Shape& s) const override { return gemm_cost(s, kF32Bytes); }
  std::string compare(const Case& before, const Case& got, const Case& want) const override {
    const auto p = static_cast<Precision>(before["prec"]);
    auto abs_rounded = [&](const char* name) {
      std::vector<double> v = widened(before, name);
      for (double& x : v) x = std::fabs(rounded(static_cast<float>(x), p));
      return v;
    };
    return gemm_bound(abs_rounded("A"), abs_rounded("B"), before.buffer("C"), got.buffer("C"), want.buffer("C"),
                      before.shape());
  }
};

class MatmulBf16 final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override {
    return transposes_and_betas({{1, 1, 1}, {5, 3, 7}, {33, 17, 65}, {96, 80, 200}}, {1});
  }
  Shape bench_shape() const override { return qkv_projection(Precision::kBF16); }
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    c.in_bf16("A", random_floats(s["M"] * s["K"], seed + 5));
    c.in_bf16("B", random_floats(s["K"] * s["N"], seed + 6));
    c.inout_f32("C", s["M"] * s["N"], seed + 7, Tol::exact());  // compare(): the error bound
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.matmul_bf16(ctx, c.f32("C"), c.bf16("A"), c.bf16("B"), c["M"], c["N"], c["K"], c["trans_a"] != 0,
                    c["trans_b"] != 0, static_cast<float>(c["beta"]));
  }
  Cost cost(const Shape& s) const override { return gemm_cost(s, kBf16Bytes); }
  std::string compare(const Case& before, const Case& got, const Case& want) const override {
    auto abs_of = [&](const char* name) {
      std::vector<double> v = widened(before, name);
      for (double& x : v) x = std::fabs(x);
      return v;
    };
    return gemm_bound(abs_of("A"), abs_of("B"), before.buffer("C"), got.buffer("C"), want.buffer("C"), before.shape());
  }
};

std::vector<double> abs_widened(const Case& c, const char* name) {
  std::vector<double> v = widened(c, name);
  for (double& x : v) x = std::fabs(x);
  return v;
}

// Every transpose at beta = 1 (the residual R is the GEMM's C), odd shapes; shape "beta" = 1 only
// tells gemm_bound that R is part of the result.
std::vector<Shape> epilogue_shapes() {
  std::vector<Shape> out;
  for (auto [M, N, K] : {std::array<int64_t, 3>{1, 1, 1}, {5, 3, 7}, {33, 17, 65}, {96, 80, 200}})
    for (int64_t t = 0; t < 4; ++t)
      out.push_back({{"M", M}, {"N", N}, {"K", K}, {"trans_a", t & 1}, {"trans_b", t >> 1}, {"beta", 1}, {"prec", 1}});
  return out;
}

// D = op(A) op(B) + R: the residual add in the epilogue.
class MatmulBf16Add final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override { return epilogue_shapes(); }
  Shape bench_shape() const override { return qkv_projection(Precision::kBF16).with("beta", 1); }
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    c.in_bf16("A", random_floats(s["M"] * s["K"], seed + 11));
    c.in_bf16("B", random_floats(s["K"] * s["N"], seed + 12));
    c.in_f32("R", s["M"] * s["N"], seed + 13);
    c.out_f32("D", s["M"] * s["N"], Tol::exact());  // compare(): the error bound
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.matmul_bf16_add(ctx, c.f32("D"), c.f32("R"), c.bf16("A"), c.bf16("B"), c["M"], c["N"], c["K"],
                        c["trans_a"] != 0, c["trans_b"] != 0);
  }
  Cost cost(const Shape& s) const override { return gemm_cost(s, kBf16Bytes); }
  std::string compare(const Case& before, const Case& got, const Case& want) const override {
    return gemm_bound(abs_widened(before, "A"), abs_widened(before, "B"), before.buffer("R"), got.buffer("D"),
                      want.buffer("D"), before.shape());
  }
};

// C = bf16(op(A) op(B)): the output rounded in the epilogue.
class MatmulBf16Rounded final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override {
    std::vector<Shape> out;
    for (const Shape& s : epilogue_shapes()) out.push_back(s.with("beta", 0));
    return out;
  }
  Shape bench_shape() const override { return qkv_projection(Precision::kBF16); }
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    c.in_bf16("A", random_floats(s["M"] * s["K"], seed + 14));
    c.in_bf16("B", random_floats(s["K"] * s["N"], seed + 15));
    c.out_bf16("C", s["M"] * s["N"], Tol::exact());  // compare(): the error bound
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.matmul_bf16_rounded(ctx, c.bf16("C"), c.bf16("A"), c.bf16("B"), c["M"], c["N"], c["K"], c["trans_a"] != 0,
                            c["trans_b"] != 0);
  }
  Cost cost(const Shape& s) const override {
    const double M = s["M"], N = s["N"], K = s["K"];
    return {kBf16Bytes * (M * K + K * N + M * N), 2 * M * N * K, Precision::kBF16};
  }
  std::string compare(const Case& before, const Case& got, const Case& want) const override {
    return gemm_bound(abs_widened(before, "A"), abs_widened(before, "B"), got.buffer("C"), got.buffer("C"),
                      want.buffer("C"), before.shape(), 0x1p-7);
  }
};

}  // namespace

const OpCase& matmul_bf16_add() {
  static const MatmulBf16Add row;
  return row;
}
const OpCase& matmul_bf16_rounded() {
  static const MatmulBf16Rounded row;
  return row;
}

const OpCase& matmul() {
  static const Matmul row;
  return row;
}
const OpCase& matmul_bf16() {
  static const MatmulBf16 row;
  return row;
}

}  // namespace ft::test::rows

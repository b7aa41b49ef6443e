// Rows: add_inplace, sum_squares, sum_in_order, to/from bf16 and fp16. Sizes below and above the vector
// width, the threading cut and sum_squares' 16384-element blocks; the vectorised ops also on
// buffers that start past a 16-byte boundary (offset_of).
#include <bit>
#include <cmath>
#include <limits>
#include <string>

#include "ops/op_cases.h"
#include "ops/rows_util.h"

namespace ft::test::rows {
namespace {

std::vector<Shape> sizes() {
  return {{{"n", 1}}, {{"n", 15}}, {{"n", 17}}, {{"n", 1000}}, {{"n", 100003}}, {{"n", 1 << 20}}};
}

// The sizes, and two with every buffer off a 16-byte boundary (the scalar path).
std::vector<Shape> vector_sizes() {
  std::vector<Shape> v = sizes();
  v.insert(v.begin() + 4, {{{"n", 1000}, {"off", 1}}, {{"n", 17}, {"off", 3}}});
  return v;
}

class AddInplace final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override { return vector_sizes(); }
  Shape bench_shape() const override { return {{"n", 2048 * 768}}; }  // a residual add
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    c.in_f32("x", s["n"] + offset_of(s), seed + 61);
    c.inout_f32("y", s["n"] + offset_of(s), seed + 62, Tol::exact());
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    const int64_t o = offset_of(c.shape());
    ops.add_inplace(ctx, c.f32("y") + o, c.f32("x") + o, c["n"]);
  }
  Cost cost(const Shape& s) const override { return {3 * kF32Bytes * s["n"], 1.0 * s["n"]}; }
};

// Accumulates onto a sum already there (a norm over several ranges).
class SumSquares final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override { return sizes(); }
  Shape bench_shape() const override { return {{"n", 16 << 20}}; }
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    c.in_f32("x", s["n"], seed + 64);
    c.inout_f64("sum", {0.5}, Tol::close(1e-12, 0));
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.sum_squares(ctx, c.f64("sum"), c.f32("x"), c["n"]);
  }
  Cost cost(const Shape& s) const override { return {kF32Bytes * s["n"], 2.0 * s["n"]}; }
};

// Adds element by element onto a sum already there: the reference's loop, bit for bit.
class SumInOrder final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override { return sizes(); }
  Shape bench_shape() const override { return {{"n", 256}}; }  // the token losses of one loss chunk
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    c.in_f32("x", s["n"], seed + 66, 0.0f, 12.0f);  // token losses
    c.inout_f64("sum", {1234.5}, Tol::exact());
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.sum_in_order(ctx, c.f64("sum"), c.f32("x"), c["n"]);
  }
  Cost cost(const Shape& s) const override { return {kF32Bytes * s["n"], 1.0 * s["n"]}; }
};

// Rounding ties to even (halfway values, alternately odd and even below) and NaN staying NaN, in
// the vector body and the tail alike.
class ToBf16 final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override { return vector_sizes(); }
  Shape bench_shape() const override { return {{"n", 16 << 20}}; }  // the bf16 copy of 16 M weights
  Case make(const Shape& s, uint64_t seed) const override {
    const int64_t n = s["n"], o = offset_of(s);
    std::vector<float> x = random_floats(n + o, seed + 65);
    for (int64_t i = 0; i < n; i += 7)
      x[static_cast<size_t>(o + i)] =
          std::bit_cast<float>(static_cast<uint32_t>(0x3f808000u + ((i / 7) % 2) * 0x10000u));
    if (n > 3) x[static_cast<size_t>(o + 3)] = std::numeric_limits<float>::quiet_NaN();
    Case c(s);
    c.in_f32("x", x);
    c.out_bf16("y", n + o, Tol::exact());
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    const int64_t o = offset_of(c.shape());
    ops.to_bf16(ctx, c.bf16("y") + o, c.f32("x") + o, c["n"]);
  }
  Cost cost(const Shape& s) const override { return {(kF32Bytes + kBf16Bytes) * s["n"], 0}; }
};

// Every bf16 value back to fp32 exactly (the inputs are rounded to bf16 by in_bf16), in the vector
// body and the tail alike.
class FromBf16 final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override { return vector_sizes(); }
  Shape bench_shape() const override { return {{"n", 16 << 20}}; }  // a 16 M-float bf16 gradient bucket
  Case make(const Shape& s, uint64_t seed) const override {
    const int64_t n = s["n"] + offset_of(s);
    Case c(s);
    c.in_bf16("x", random_floats(n, seed + 66));
    c.out_f32("y", n, Tol::exact());
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    const int64_t o = offset_of(c.shape());
    ops.from_bf16(ctx, c.f32("y") + o, c.bf16("x") + o, c["n"]);
  }
  Cost cost(const Shape& s) const override { return {(kF32Bytes + kBf16Bytes) * s["n"], 0}; }
};

// fp16's edges, in the vector body and the tail alike: halfway values between neighbouring halves
// (ties to even: alternately up and down), the overflow boundary (65504 stays, 65519.99 rounds
// down, 65520 and above become inf), subnormal halves and what rounds to 0, and a NaN. The values
// themselves are checked against numpy's float16 by tests/unit/f16_numpy_test.py.
class ToFp16 final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override { return vector_sizes(); }
  Shape bench_shape() const override { return {{"n", 16 << 20}}; }  // a 16 M-float gradient bucket
  Case make(const Shape& s, uint64_t seed) const override {
    const int64_t n = s["n"] + offset_of(s);
    std::vector<float> x = random_floats(n, seed + 67, -70000.0f, 70000.0f);
    const float edges[] = {1.0f + 1.0f / 2048,
                           1.0f + 3.0f / 2048,
                           65504.0f,
                           65519.99f,
                           65520.0f,
                           -65520.0f,
                           3e-8f,
                           2.98023224e-8f,
                           -1e-7f,
                           6.1e-5f,
                           std::numeric_limits<float>::quiet_NaN(),
                           1e-3f,
                           -0.0f};
    for (int64_t i = 0; i < n; i += 3) x[static_cast<size_t>(i)] = edges[(i / 3) % std::size(edges)];
    Case c(s);
    c.in_f32("x", x);
    c.out_f16("y", n, Tol::exact());
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    const int64_t o = offset_of(c.shape());
    ops.to_fp16(ctx, c.f16("y") + o, c.f32("x") + o, c["n"]);
  }
  Cost cost(const Shape& s) const override { return {(kF32Bytes + kF16Bytes) * s["n"], 0}; }
};

// Every fp16 value back to fp32 exactly: random ones, and at the two largest sizes every one of the
// 65536 patterns (subnormals, infinities, NaNs). A NaN must stay a NaN, its payload bits may differ
// (F16C quiets a signalling NaN, the scalar code keeps it).
class FromFp16 final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override { return vector_sizes(); }
  Shape bench_shape() const override { return {{"n", 16 << 20}}; }
  Case make(const Shape& s, uint64_t seed) const override {
    const int64_t n = s["n"] + offset_of(s);
    Case c(s);
    uint16_t* x = c.in_f16("x", random_floats(n, seed + 68, -60000.0f, 60000.0f));
    if (n >= 1000)
      for (int64_t i = 0; i < n; ++i) x[i] = static_cast<uint16_t>(i * 40503);  // odd: every pattern per 65536
    c.out_f32("y", n, Tol::exact());
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    const int64_t o = offset_of(c.shape());
    ops.from_fp16(ctx, c.f32("y") + o, c.f16("x") + o, c["n"]);
  }
  std::string compare(const Case&, const Case& got, const Case& want) const override {
    const Buffer &g = got.buffer("y"), &w = want.buffer("y");
    for (size_t i = 0; i < g.count; ++i) {
      const float a = g.as<float>()[i], b = w.as<float>()[i];
      if (std::isnan(a) && std::isnan(b)) continue;
      if (std::bit_cast<uint32_t>(a) != std::bit_cast<uint32_t>(b))
        return "y[" + std::to_string(i) + "]: got " + std::to_string(a) + ", want " + std::to_string(b) +
               " (fp16 bits " + std::to_string(got.buffer("x").as<uint16_t>()[i]) + ")";
    }
    return "";
  }
  Cost cost(const Shape& s) const override { return {(kF32Bytes + kF16Bytes) * s["n"], 0}; }
};

}  // namespace

const OpCase& add_inplace() {
  static const AddInplace row;
  return row;
}
const OpCase& sum_squares() {
  static const SumSquares row;
  return row;
}
const OpCase& sum_in_order() {
  static const SumInOrder row;
  return row;
}
const OpCase& to_bf16() {
  static const ToBf16 row;
  return row;
}
const OpCase& from_bf16() {
  static const FromBf16 row;
  return row;
}

const OpCase& to_fp16() {
  static const ToFp16 row;
  return row;
}
const OpCase& from_fp16() {
  static const FromFp16 row;
  return row;
}

}  // namespace ft::test::rows

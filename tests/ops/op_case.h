// One op's case in the op harness: named sizes (Shape), the op's buffers with how each output
// must match the reference (Case), and what a row says about its op (OpCase). The rows are in
// tests/ops/rows_*.cpp, listed in op_cases.cpp; the checks that run them in op_checks.h.
//
//   Case c(shape);
//   c.in_f32("x", N * C, /*seed=*/1, -2.0f, 2.0f);          // random input
//   c.out_f32("out", N * C, Tol::close(2e-6, 0, 1e-7));     // written by the op (starts NaN)
//   c.inout_f32("dw", C, /*seed=*/2, Tol::close(1e-5, 0));  // accumulated (starts random)
//   ops.rmsnorm_forward(ctx, c.f32("out"), ...);
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/ops.h"

namespace ft::test {

// Sizes and flags of one case by name ("N", "C", "trans_a", ...), in the order given.
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<std::pair<const char*, int64_t>> dims);
  int64_t operator[](std::string_view name) const;             // throws std::out_of_range naming a missing size
  int64_t get(std::string_view name, int64_t fallback) const;  // `fallback` where the size is missing
  std::string str() const;                                     // "N 7, C 33"
  Shape with(const char* name, int64_t value) const;           // a copy with one size set (added if new)

 private:
  std::vector<std::pair<std::string, int64_t>> dims_;
};

// How close an output must be to the reference's. Element-wise (kClose):
//   |got − want| <= atol + atol_of_max · max|want| + rtol · |want|;
// kRelMax: max|got − want| <= rtol · max|want| (attention: an error relative to the values' size);
// kBf16: bf16 bit patterns at most one step apart (or equal values); kExact: bit for bit.
struct Tol {
  enum Kind : uint8_t { kExact, kClose, kRelMax, kBf16 };
  Kind kind = kExact;
  double rtol = 0, atol = 0, atol_of_max = 0;
  static Tol exact() { return {}; }
  static Tol close(double rtol, double atol, double atol_of_max = 0) { return {kClose, rtol, atol, atol_of_max}; }
  static Tol rel_max(double r) { return {kRelMax, r, 0, 0}; }
  static Tol bf16() { return {kBf16, 0, 0, 0}; }
  std::string str() const;
};

enum class Elem : uint8_t { kF32, kBF16, kI32, kF64, kF16 };  // bf16, f16: uint16_t bit patterns
enum class Role : uint8_t { kIn, kOut, kInOut };  // kOut: written; kInOut: read, then written or accumulated

struct Buffer {
  std::string name;
  Elem elem = Elem::kF32;
  Role role = Role::kIn;
  Tol tol;                      // outputs
  std::vector<std::byte> data;  // host copy
  size_t count = 0;             // elements
  template <typename T>
  T* as() {
    return reinterpret_cast<T*>(data.data());
  }
  template <typename T>
  const T* as() const {
    return reinterpret_cast<const T*>(data.data());
  }
  double at(size_t i) const;  // element i as a double (bf16, f16 widened)
  bool is_output() const { return role != Role::kIn; }
};

// The buffers of one case, host side. Random inputs are uniform in [lo, hi) from a seeded
// generator; outputs start as NaN (bf16: a NaN pattern), so an element an op forgets to write
// fails the comparison.
class Case {
 public:
  explicit Case(Shape shape) : shape_(std::move(shape)) {}
  const Shape& shape() const { return shape_; }
  int64_t operator[](std::string_view name) const { return shape_[name]; }

  float* in_f32(const std::string& name, int64_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f);
  float* in_f32(const std::string& name, const std::vector<float>& values);
  int32_t* in_i32(const std::string& name, const std::vector<int32_t>& values);
  uint16_t* in_bf16(const std::string& name, const std::vector<float>& values);  // rounded
  uint16_t* in_f16(const std::string& name, const std::vector<float>& values);   // rounded (f32_to_f16)
  double* in_f64(const std::string& name, const std::vector<double>& values);
  float* out_f32(const std::string& name, int64_t n, Tol tol);
  uint16_t* out_bf16(const std::string& name, int64_t n, Tol tol);
  uint16_t* out_f16(const std::string& name, int64_t n, Tol tol);  // starts a NaN pattern
  int32_t* out_i32(const std::string& name, int64_t n, Tol tol);   // starts INT32_MIN
  double* out_f64(const std::string& name, int64_t n, Tol tol);
  // Inputs the op also writes: accumulated gradients, in-place ops, optimizer state.
  float* inout_f32(const std::string& name, int64_t n, uint64_t seed, Tol tol, float lo = -1.0f, float hi = 1.0f);
  float* inout_f32(const std::string& name, const std::vector<float>& values, Tol tol);
  double* inout_f64(const std::string& name, const std::vector<double>& values, Tol tol);
  uint16_t* inout_bf16(const std::string& name, const std::vector<float>& values, Tol tol);  // rounded

  float* f32(std::string_view name) { return buffer(name, Elem::kF32).as<float>(); }
  const float* f32(std::string_view name) const { return buffer(name, Elem::kF32).as<float>(); }
  uint16_t* bf16(std::string_view name) { return buffer(name, Elem::kBF16).as<uint16_t>(); }
  uint16_t* f16(std::string_view name) { return buffer(name, Elem::kF16).as<uint16_t>(); }
  const int32_t* i32(std::string_view name) const { return buffer(name, Elem::kI32).as<int32_t>(); }
  int32_t* i32(std::string_view name) { return buffer(name, Elem::kI32).as<int32_t>(); }
  double* f64(std::string_view name) { return buffer(name, Elem::kF64).as<double>(); }
  std::vector<float> f32_vec(std::string_view name) const;

  const Buffer& buffer(std::string_view name) const;
  std::vector<Buffer>& buffers() { return buffers_; }
  const std::vector<Buffer>& buffers() const { return buffers_; }

 private:
  Buffer& add(const std::string& name, Elem elem, Role role, size_t count, Tol tol);
  Buffer& buffer(std::string_view name, Elem elem);
  const Buffer& buffer(std::string_view name, Elem elem) const;
  Shape shape_;
  std::vector<Buffer> buffers_;
};

// Empty when got matches want within the tolerance; else what differs, worst element first.
std::string compare_buffer(const Buffer& got, const Buffer& want);

// What an op must move and compute at least once: the bench's roofline.
struct Cost {
  double bytes = 0;
  double flops = 0;
  Precision flops_at = Precision::kF32;  // the GEMM peak flops are measured against
};

// Float64 inputs of a gradient check: every f32 input of a case, widened, by name.
using Inputs64 = std::map<std::string, std::vector<double>, std::less<>>;

// A gradient a backward op computes: `grad` (an output buffer) is d loss / d `input`, where
// `input` is an input of the forward (a buffer of the case, not necessarily read by the backward
// op). accumulates: the op adds the gradient to what the buffer held.
struct GradOf {
  const char* grad;
  const char* input;
  bool accumulates;
};

// One row of the harness: everything the tests and the bench need to know about one op.
class OpCase {
 public:
  virtual ~OpCase() = default;
  // Shapes the tests run: odd sizes, vector tails, and sizes on both sides of threading cuts.
  virtual std::vector<Shape> test_shapes() const = 0;
  // The shape the bench runs: one llama-125m micro-batch (4 × 512 tokens, C 768, F 2048, 12 heads
  // of 64, vocabulary 32000 in chunks of 256 tokens, 16 M parameters for the optimizer ops).
  virtual Shape bench_shape() const = 0;
  // The op's buffers for a shape: inputs from the seed, outputs with their tolerances (which may
  // depend on the inputs). Inputs made by another op (rstd, lse) come from the reference.
  virtual Case make(const Shape& s, uint64_t seed) const = 0;
  // Runs the op once on the case's buffers through a backend's table.
  virtual void run(const OpTable& ops, const ExecContext& ctx, Case& c) const = 0;
  // Bytes and FLOPs the op moves at least once on a shape.
  virtual Cost cost(const Shape& s) const = 0;
  // Compares got with want (the reference's run of the same case); the default compares every
  // output buffer with its tolerance. `before` is the case as made (GEMM's bound reads it).
  virtual std::string compare(const Case& before, const Case& got, const Case& want) const;

  // ---- backward ops: the float64 finite-difference check (empty grads() for other ops) ----
  virtual std::vector<GradOf> grads() const { return {}; }
  // Shapes small enough for central differences over every input element.
  virtual std::vector<Shape> grad_shapes() const { return {}; }
  // The loss whose gradient the op computes, in float64 through the reference templates
  // (kernels/ref/ref_impl.h), as a function of the inputs in `in`; `c` is the case as made.
  virtual double loss64(const Case& c, const Inputs64& in) const { return 0; }
  // The reference backward in float64 (ref_impl) on the same inputs: the gradients of grads(), by
  // grad name, not accumulated. Checked against the differences at a float64 tolerance.
  virtual std::map<std::string, std::vector<double>> backward64(const Case& c, const Inputs64& in) const { return {}; }
  // How close a float backend's gradient must be to the finite differences.
  virtual Tol grad_tol() const { return Tol::close(2e-4, 0, 1e-5); }
};

}  // namespace ft::test

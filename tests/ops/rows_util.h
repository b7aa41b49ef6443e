// Helpers the rows (rows_*.cpp) share: random tokens, float64 sums, byte counts.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

#include "ops/op_case.h"

namespace ft::test {

inline constexpr double kF32Bytes = 4, kBf16Bytes = 2, kF16Bytes = 2;

// Uniform in [lo, hi) (the same values Case::in_f32 makes from the seed).
inline std::vector<float> random_floats(int64_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// Uniform integers in [lo, hi).
inline std::vector<int32_t> random_ints(int64_t n, int32_t lo, int32_t hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> d(lo, hi - 1);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int32_t& t : v) t = d(rng);
  return v;
}

// Rows of vectorised ops (16-byte accesses where the pointers allow) run some shapes with an element
// offset "off": every buffer starts `off` elements past its allocation, so the pointers are not
// 16-byte aligned and the kernels' scalar paths run too (on the virtual GPU a misaligned vector
// access faults, as on a GPU). Without "off" in the shape, 0.
inline int64_t offset_of(const Shape& s) {
  return s.get("off", 0);
}

inline double dot64(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) s += a[i] * b[i];
  return s;
}

template <typename T>
double max_abs_of(const T* v, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(static_cast<double>(v[i])));
  return m;
}

// The float64 copy of input `name` of a gradient check.
inline const std::vector<double>& in64(const Inputs64& in, std::string_view name) {
  return in.find(name)->second;
}

// A buffer of the case widened to float64 (the weights of Σ w ∘ out, fixed inputs).
inline std::vector<double> widened(const Case& c, std::string_view name) {
  const Buffer& b = c.buffer(name);
  std::vector<double> v(b.count);
  for (size_t i = 0; i < b.count; ++i) v[i] = b.at(i);
  return v;
}

}  // namespace ft::test

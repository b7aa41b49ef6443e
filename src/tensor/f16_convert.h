// fp32 <-> IEEE fp16 (binary16) over arrays, chosen at run time by what the CPU has: AVX-512F
// (16 lanes), F16C (8 lanes, every AVX2 CPU), else the scalar ft::f32_to_f16 / f16_to_f32. The
// three give the same bits, numpy's float16 (tests/unit/tensor_f16_numpy_test.cpp): round to
// nearest, ties to even; |x| >= 65520 becomes ±inf; values below 2^-14 become fp16 subnormals
// (steps of 2^-24 ≈ 6e-8), up to 2^-25 ±0; fp16 -> fp32 is exact. A NaN stays a NaN of its sign;
// its payload bits differ between the paths (F16C quiets a signalling NaN). The build's -march
// does not matter: an x86-64-v3 (AVX2) build still uses AVX-512 where the CPU has it.
//
//   ft::f32_to_f16_array(wire16, grads, n);       // the fastest path this CPU has
//   ft::f16_to_f32_array(grads, wire16, n);
//   for (F16Path p : available_f16_paths()) ...   // tests run each path
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ft {

enum class F16Path : uint8_t { kScalar = 0, kF16C = 1, kAvx512 = 2 };
const char* f16_path_name(F16Path p);  // "scalar", "f16c", "avx512"
// The paths this CPU can run, slowest first (kScalar always); best_f16_path() is the last.
std::vector<F16Path> available_f16_paths();
F16Path best_f16_path();

void f32_to_f16_array(uint16_t* dst, const float* src, size_t n);
void f16_to_f32_array(float* dst, const uint16_t* src, size_t n);
// One path explicitly (it must be available).
void f32_to_f16_array(F16Path p, uint16_t* dst, const float* src, size_t n);
void f16_to_f32_array(F16Path p, float* dst, const uint16_t* src, size_t n);

}  // namespace ft

// Element types and conversions. bf16 and f16 are stored as uint16_t bit patterns; conversions
// from f32 round to nearest, ties to even, and keep NaN a (quiet) NaN.
//
//   uint16_t h = ft::f32_to_bf16(1.0f);   float f = ft::bf16_to_f32(h);
//   ft::convert(dst, DType::kBF16, src, DType::kF32, n);   // bulk, vectorised where it pays
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ft {

enum class DType : uint8_t { kF32 = 0, kBF16 = 1, kF16 = 2, kI32 = 3, kU16 = 4, kU32 = 5, kI64 = 6, kF64 = 7 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);                 // "f32", "bf16", ...
DType dtype_from_name(const std::string& name);  // throws ft::Error on an unknown name

inline uint16_t f32_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float bf16_to_f32(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);

// Bulk conversion between any two of f32, bf16, f16.
void convert(void* dst, DType dst_type, const void* src, DType src_type, size_t n);

}  // namespace ft

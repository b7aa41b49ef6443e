#include "tensor/dtype.h"

#include <immintrin.h>

#include <cstring>

#include "tensor/f16_convert.h"
#include "util/error.h"

namespace ft {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32:
      return 4;
    case DType::kBF16:
      return 2;
    case DType::kF16:
      return 2;
    case DType::kI32:
      return 4;
    case DType::kU16:
      return 2;
    case DType::kU32:
      return 4;
    case DType::kI64:
    case DType::kF64:
      return 8;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
    case DType::kI32:
      return "i32";
    case DType::kU16:
      return "u16";
    case DType::kU32:
      return "u32";
    case DType::kI64:
      return "i64";
    case DType::kF64:
      return "f64";
  }
  return "?";
}

DType dtype_from_name(const std::string& name) {
  for (DType t :
       {DType::kF32, DType::kBF16, DType::kF16, DType::kI32, DType::kU16, DType::kU32, DType::kI64, DType::kF64}) {
    if (name == dtype_name(t)) return t;
  }
  throw Error(fmt::format("unknown dtype '{}'", name), "expected f32, bf16, f16, i32, u16, u32, i64 or f64");
}

// IEEE half: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
uint16_t f32_to_f16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) {  // Inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
  }
  if (absx >= 0x477ff000u) {  // rounds to >= 65520 → Inf
    return static_cast<uint16_t>(sign | 0x7c00u);
  }
  if (absx < 0x38800000u) {  // below the smallest normal half (2^-14): subnormal or zero
    // value = absx as float; half subnormal unit is 2^-24. Round to nearest even.
    float a = std::bit_cast<float>(absx);
    float scaled = a * 16777216.0f;  // a / 2^-24, exact (power of two)
    // nearbyint uses the current rounding mode (nearest-even by default).
    uint32_t m = static_cast<uint32_t>(__builtin_nearbyintf(scaled));
    return static_cast<uint16_t>(sign | m);  // m == 0x400 rolls into the smallest normal: correct
  }
  uint32_t exp = (absx >> 23) - 127 + 15;
  uint32_t mant = absx & 0x7fffffu;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // carries into the exponent correctly
  return static_cast<uint16_t>(sign | h);
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

namespace {

void f32_to_bf16_n(uint16_t* dst, const float* src, size_t n) {
  size_t i = 0;
#if defined(__AVX512BF16__)
  for (; i + 32 <= n; i += 32) {
    __m512 a = _mm512_loadu_ps(src + i), b = _mm512_loadu_ps(src + i + 16);
    __m512bh r = _mm512_cvtne2ps_pbh(b, a);
    _mm512_storeu_si512(dst + i, (__m512i)r);
  }
#endif
  for (; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

void bf16_to_f32_n(float* dst, const uint16_t* src, size_t n) {
  size_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    __m512i w = _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16);
    _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(w));
  }
#endif
  for (; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

}  // namespace

void convert(void* dst, DType dt, const void* src, DType st, size_t n) {
  if (dt == st) {
    std::memcpy(dst, src, n * dtype_size(dt));
    return;
  }
  auto* d16 = static_cast<uint16_t*>(dst);
  auto* s16 = static_cast<const uint16_t*>(src);
  auto* d32 = static_cast<float*>(dst);
  auto* s32 = static_cast<const float*>(src);
  if (st == DType::kF32 && dt == DType::kBF16) return f32_to_bf16_n(d16, s32, n);
  if (st == DType::kBF16 && dt == DType::kF32) return bf16_to_f32_n(d32, s16, n);
  if (st == DType::kF32 && dt == DType::kF16) return f32_to_f16_array(d16, s32, n);  // F16C / AVX-512 at run time
  if (st == DType::kF16 && dt == DType::kF32) return f16_to_f32_array(d32, s16, n);
  if (st == DType::kBF16 && dt == DType::kF16) {
    for (size_t i = 0; i < n; ++i) d16[i] = f32_to_f16(bf16_to_f32(s16[i]));
    return;
  }
  if (st == DType::kF16 && dt == DType::kBF16) {
    for (size_t i = 0; i < n; ++i) d16[i] = f32_to_bf16(f16_to_f32(s16[i]));
    return;
  }
  FT_CHECK(false, "unsupported conversion {} -> {}", dtype_name(st), dtype_name(dt));
}

}  // namespace ft

#include "tensor/f16_convert.h"

#include <cpuid.h>
#include <immintrin.h>

#include <cstring>

#include "tensor/dtype.h"
#include "util/error.h"

namespace ft {
namespace {

constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

void to_f16_scalar(uint16_t* dst, const float* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

void to_f32_scalar(float* dst, const uint16_t* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

// The vector paths convert whole vectors and hand the tail (< one vector) to the scalar code,
// which rounds the same way.
__attribute__((target("avx,f16c"))) void to_f16_f16c(uint16_t* dst, const float* src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), kRound));
  to_f16_scalar(dst + i, src + i, n - i);
}

__attribute__((target("avx,f16c"))) void to_f32_f16c(float* dst, const uint16_t* src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  to_f32_scalar(dst + i, src + i, n - i);
}

__attribute__((target("avx512f"))) void to_f16_avx512(uint16_t* dst, const float* src, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_cvtps_ph(_mm512_loadu_ps(src + i), kRound));
  to_f16_scalar(dst + i, src + i, n - i);
}

__attribute__((target("avx512f"))) void to_f32_avx512(float* dst, const uint16_t* src, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
  to_f32_scalar(dst + i, src + i, n - i);
}

// CPUID.1:ECX.F16C (clang's __builtin_cpu_supports knows no "f16c"); AVX's check above covers the
// OS saving the ymm registers.
bool has_f16c_flag() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
}

bool has(F16Path p) {
  __builtin_cpu_init();
  switch (p) {
    case F16Path::kScalar:
      return true;
    case F16Path::kF16C:
      return __builtin_cpu_supports("avx") && has_f16c_flag();
    case F16Path::kAvx512:
      return __builtin_cpu_supports("avx512f");
  }
  return false;
}

void require(F16Path p) {
  FT_CHECK(has(p), "fp16 conversion path {} is not available on this CPU", f16_path_name(p));
}

}  // namespace

const char* f16_path_name(F16Path p) {
  switch (p) {
    case F16Path::kScalar:
      return "scalar";
    case F16Path::kF16C:
      return "f16c";
    case F16Path::kAvx512:
      return "avx512";
  }
  return "?";
}

std::vector<F16Path> available_f16_paths() {
  std::vector<F16Path> out;
  for (F16Path p : {F16Path::kScalar, F16Path::kF16C, F16Path::kAvx512})
    if (has(p)) out.push_back(p);
  return out;
}

F16Path best_f16_path() {
  static const F16Path best = available_f16_paths().back();
  return best;
}

namespace {

void to_f16_on(F16Path p, uint16_t* dst, const float* src, size_t n) {
  switch (p) {
    case F16Path::kScalar:
      return to_f16_scalar(dst, src, n);
    case F16Path::kF16C:
      return to_f16_f16c(dst, src, n);
    case F16Path::kAvx512:
      return to_f16_avx512(dst, src, n);
  }
}

void to_f32_on(F16Path p, float* dst, const uint16_t* src, size_t n) {
  switch (p) {
    case F16Path::kScalar:
      return to_f32_scalar(dst, src, n);
    case F16Path::kF16C:
      return to_f32_f16c(dst, src, n);
    case F16Path::kAvx512:
      return to_f32_avx512(dst, src, n);
  }
}

}  // namespace

void f32_to_f16_array(F16Path p, uint16_t* dst, const float* src, size_t n) {
  require(p);
  to_f16_on(p, dst, src, n);
}

void f16_to_f32_array(F16Path p, float* dst, const uint16_t* src, size_t n) {
  require(p);
  to_f32_on(p, dst, src, n);
}

void f32_to_f16_array(uint16_t* dst, const float* src, size_t n) {
  to_f16_on(best_f16_path(), dst, src, n);
}

void f16_to_f32_array(float* dst, const uint16_t* src, size_t n) {
  to_f32_on(best_f16_path(), dst, src, n);
}

}  // namespace ft

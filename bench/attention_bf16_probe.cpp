// Does AVX512-BF16 pay for attention's products on this CPU? Runs the attention micro-kernel's
// register block (6 rows x 4 vectors, broadcast A, data in L1) once with fp32 FMAs and once
// with vdpbf16ps (bf16 pairs, fp32 accumulation), and prints GFLOP per CPU-second of each and
// their ratio last. (Measured 2026-11-30: ~150 vs ~75 — bf16 dot products are slower here.)
//
//   build/bench/attention_bf16_probe
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <vector>

namespace {

[[maybe_unused]] double cpu_now() {  // unused where -march lacks AVX512-BF16
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

constexpr int kK = 64, kReps = 400000;

#if defined(__AVX512F__) && defined(__AVX512BF16__)
// C(6, 64) = A(6, K) B(K, 64) in fp32.
__attribute__((noinline)) void fp32_block(float* C, const float* A, const float* B) {
  __m512 acc[6][4] = {};
  for (int k = 0; k < kK; ++k) {
    __m512 b[4];
    for (int v = 0; v < 4; ++v) b[v] = _mm512_loadu_ps(B + k * 64 + 16 * v);
#pragma GCC unroll 6
    for (int r = 0; r < 6; ++r) {
      const __m512 a = _mm512_set1_ps(A[r * kK + k]);
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_fmadd_ps(a, b[v], acc[r][v]);
    }
  }
  for (int r = 0; r < 6; ++r)
    for (int v = 0; v < 4; ++v) _mm512_storeu_ps(C + r * 64 + 16 * v, acc[r][v]);
}

// The same product with bf16 inputs: B packed as (K/2, 64, 2), A rows with k pairs adjacent.
__attribute__((noinline)) void bf16_block(float* C, const uint16_t* A, const uint16_t* B) {
  __m512 acc[6][4] = {};
  for (int k = 0; k < kK; k += 2) {
    __m512bh b[4];
    for (int v = 0; v < 4; ++v) b[v] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(B + (k / 2) * 128 + 32 * v));
#pragma GCC unroll 6
    for (int r = 0; r < 6; ++r) {
      int32_t pair;
      __builtin_memcpy(&pair, A + r * kK + k, 4);
      const __m512bh a = reinterpret_cast<__m512bh>(_mm512_set1_epi32(pair));
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], a, b[v]);
    }
  }
  for (int r = 0; r < 6; ++r)
    for (int v = 0; v < 4; ++v) _mm512_storeu_ps(C + r * 64 + 16 * v, acc[r][v]);
}
#endif

}  // namespace

int main() {
#if defined(__AVX512F__) && defined(__AVX512BF16__)
  std::vector<float> A(6 * kK, 0.5f), B(kK * 64, 0.25f), C(6 * 64);
  std::vector<uint16_t> Ab(6 * kK, 0x3f00), Bb(kK * 64, 0x3e80);  // 0.5, 0.25 in bf16
  const double flop = 2.0 * 6 * 64 * kK * kReps;
  double best32 = 0, best16 = 0;
  for (int trial = 0; trial < 3; ++trial) {
    double t0 = cpu_now();
    for (int r = 0; r < kReps; ++r) fp32_block(C.data(), A.data(), B.data());
    double t1 = cpu_now();
    for (int r = 0; r < kReps; ++r) bf16_block(C.data(), Ab.data(), Bb.data());
    double t2 = cpu_now();
    best32 = std::max(best32, flop / (t1 - t0) * 1e-9);
    best16 = std::max(best16, flop / (t2 - t1) * 1e-9);
  }
  std::printf("fp32 FMA block:      %.1f GFLOP per CPU-second\n", best32);
  std::printf("bf16 vdpbf16ps block: %.1f GFLOP per CPU-second\n", best16);
  std::printf("ratio bf16 / fp32: %.2f\n", best16 / best32);
#else
  std::printf("built without AVX512-BF16 (-march lacks it): nothing to measure\n");
#endif
  return 0;
}

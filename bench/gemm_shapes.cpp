// GEMM on the shapes of a llama-125m training step (4 × 512 tokens, C 768, F 2048; the tied LM
// head on a 256-token chunk of the 32000 vocabulary): forward y = x Wᵀ, dx = dy W, dW += dyᵀ x for
// every linear layer. Compares what ops::matmul runs (fp32: dnnl_sgemm) with oneDNN's fp32 matmul
// primitive, OpenBLAS, and bf16 (with and without the fp32→bf16 conversion); prints per shape,
// then the FLOP-weighted mix, and last the mix relative to the square-GEMM peak.
//
//   build/bench/bench_gemm_shapes [--reps 3] [--clock wall|cpu]
#include <omp.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/ops.h"
#include "kernels/peak.h"
#include "tensor/dtype.h"

namespace {

int g_reps = 3;
bool g_cpu_clock = false;

double now_seconds() {
  if (g_cpu_clock) {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec)) / omp_get_max_threads();
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double best_seconds(const std::function<void()>& f) {
  f();  // warm-up (primitive creation)
  double best = 1e30;
  for (int r = 0; r < g_reps; ++r) {
    double t0 = now_seconds();
    f();
    best = std::min(best, now_seconds() - t0);
  }
  return best;
}

struct Shape {
  const char* name;
  int64_t M, N, K;
  bool ta, tb;
  float beta;
};

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0) g_reps = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--clock") == 0) g_cpu_clock = std::strcmp(argv[i + 1], "cpu") == 0;
  }
  using ft::Precision;
  const int64_t N = 2048, C = 768, F = 2048, V = 32000, NL = 256;
  std::vector<Shape> shapes;
  auto linear = [&](const char* name, int64_t tokens, int64_t in, int64_t out) {
    // W (out, in), HF layout: y = x Wᵀ; dx = dy W; dW += dyᵀ x
    shapes.push_back({name, tokens, out, in, false, true, 0.0f});
    shapes.push_back({name, tokens, in, out, false, false, 0.0f});
    shapes.push_back({name, out, in, tokens, true, false, 1.0f});
  };
  linear("qkv", N, C, 3 * C);
  linear("o", N, C, C);
  linear("gate_up", N, C, 2 * F);
  linear("down", N, F, C);
  linear("lm_head", NL, C, V);

  const ft::OpenBlas& ob = ft::openblas();
  if (ob.sgemm) ob.set_num_threads(omp_get_max_threads());
  std::printf("GEMM on llama-125m step shapes, %d thread(s), %s clock, best of %d; GFLOP/s\n", omp_get_max_threads(),
              g_cpu_clock ? "cpu" : "wall", g_reps);
  std::printf("OpenBLAS core: %s%s\n\n", ob.sgemm ? ob.core.c_str() : "unavailable", ob.note.empty() ? "" : (" (" + ob.note + ")").c_str());
  std::printf("%-8s %5s %5s %5s %2s %2s %4s | %10s %10s %10s | %10s %10s\n", "layer", "M", "N", "K", "tA", "tB", "beta",
              "sgemm", "f32 prim", "OpenBLAS", "bf16+cvt", "bf16");
  constexpr int kImpls = 5;
  double flops_total = 0, secs_total[kImpls] = {};
  for (const Shape& s : shapes) {
    auto A = std::vector<float>(s.M * s.K, 0.5f), B = std::vector<float>(s.K * s.N, 0.25f);
    for (size_t i = 0; i < A.size(); ++i) A[i] = static_cast<float>(i % 13) * 0.07f - 0.4f;
    for (size_t i = 0; i < B.size(); ++i) B[i] = static_cast<float>(i % 11) * 0.05f - 0.25f;
    std::vector<uint16_t> A16(A.size()), B16(B.size());
    ft::convert(A16.data(), ft::DType::kBF16, A.data(), ft::DType::kF32, A.size());
    ft::convert(B16.data(), ft::DType::kBF16, B.data(), ft::DType::kF32, B.size());
    std::vector<float> Cm(s.M * s.N, 0.0f);
    double fl = 2.0 * s.M * s.N * s.K;
    double t[kImpls];
    t[0] = best_seconds([&] { ft::cpu::matmul(Cm.data(), A.data(), B.data(), s.M, s.N, s.K, s.ta, s.tb, s.beta, Precision::kF32); });
    t[1] = best_seconds([&] { ft::cpu::matmul_f32_primitive(Cm.data(), A.data(), B.data(), s.M, s.N, s.K, s.ta, s.tb, s.beta); });
    t[2] = ob.sgemm ? best_seconds([&] {
      ob.sgemm(101, s.ta ? 112 : 111, s.tb ? 112 : 111, static_cast<int>(s.M), static_cast<int>(s.N), static_cast<int>(s.K), 1.0f,
               A.data(), static_cast<int>(s.ta ? s.M : s.K), B.data(), static_cast<int>(s.tb ? s.K : s.N), s.beta, Cm.data(),
               static_cast<int>(s.N));
    })
                    : 0.0;
    t[3] = best_seconds([&] { ft::cpu::matmul(Cm.data(), A.data(), B.data(), s.M, s.N, s.K, s.ta, s.tb, s.beta, Precision::kBF16); });
    t[4] = best_seconds([&] { ft::cpu::matmul_bf16(Cm.data(), A16.data(), B16.data(), s.M, s.N, s.K, s.ta, s.tb, s.beta); });
    std::printf("%-8s %5lld %5lld %5lld %2d %2d %4.0f |", s.name, static_cast<long long>(s.M), static_cast<long long>(s.N),
                static_cast<long long>(s.K), s.ta, s.tb, s.beta);
    for (int i = 0; i < kImpls; ++i) {
      std::printf(" %10.1f%s", t[i] > 0 ? fl / t[i] * 1e-9 : 0.0, i == 2 ? " |" : "");
      secs_total[i] += t[i];
    }
    std::printf("\n");
    flops_total += fl;
  }
  double mix[kImpls];
  std::printf("%-37s |", "FLOP-weighted mix");
  for (int i = 0; i < kImpls; ++i) {
    mix[i] = secs_total[i] > 0 ? flops_total / secs_total[i] * 1e-9 : 0.0;
    std::printf(" %10.1f%s", mix[i], i == 2 ? " |" : "");
  }
  std::printf("\n\n");
  ft::PeakOptions opt;
  opt.cpu_clock = g_cpu_clock;
  opt.min_seconds = 0.5;
  double peak32 = ft::measure_gemm_peak(Precision::kF32, omp_get_max_threads(), opt).gflops;
  double peak16 = ft::measure_gemm_peak(Precision::kBF16, omp_get_max_threads(), opt).gflops;
  std::printf("square 2048^3 peak: f32 %.1f, bf16 %.1f GFLOP/s\n", peak32, peak16);
  std::printf("mix f32 matmul primitive / sgemm: %.2f\n", mix[1] / mix[0]);
  if (ob.sgemm) std::printf("mix f32 OpenBLAS / sgemm: %.2f\n", mix[2] / mix[0]);
  std::printf("mix bf16 (operands in bf16) / f32 sgemm: %.2f\n", mix[4] / mix[0]);
  std::printf("mix / square peak: f32 %.2f, bf16 %.2f\n", mix[0] / peak32, mix[4] / peak16);
  return 0;
}

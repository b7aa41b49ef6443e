// GEMM on the shapes of a llama-125m training step (4 × 512 tokens, C 768, F 2048; the tied LM
// head on a 256-token chunk of the 32000 vocabulary): forward y = x Wᵀ, dx = dy W, dW += dyᵀ x for
// every linear layer (backends/cpu/peak.h, llama_gemm_shapes). Compares the fp32 libraries ops::matmul
// can run (oneDNN dnnl_sgemm, OpenBLAS, BLIS; a missing one is a column of dashes), oneDNN's fp32
// matmul primitive, and bf16 as ops::matmul_bf16 runs it here (native, or emulated through the
// fp32 GEMM) and through oneDNN's own bf16 primitive where it has one; prints per shape, then the
// FLOP-weighted mix, and last the mix relative to the square-GEMM peak.
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

#include "backends/cpu/gemm.h"
#include "backends/cpu/peak.h"
#include "kernels/ops.h"
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

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0) g_reps = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--clock") == 0) g_cpu_clock = std::strcmp(argv[i + 1], "cpu") == 0;
  }
  using ft::Precision;
  using ft::cpu::GemmLibrary;
  const auto shapes = ft::llama_gemm_shapes(768, 12, 12, 2048, 32000, 2048, 256);

  std::printf("GEMM on llama-125m step shapes, %d thread(s), %s clock, best of %d; GFLOP/s; oneDNN ISA %s\n",
              omp_get_max_threads(), g_cpu_clock ? "cpu" : "wall", g_reps, ft::cpu::onednn_isa_name().c_str());
  bool have[3];
  for (GemmLibrary lib : ft::cpu::kGemmLibraries) {
    auto st = ft::cpu::gemm_library_status(lib);
    have[static_cast<int>(lib)] = st.available;
    std::printf("  %-8s %s%s\n", ft::cpu::gemm_library_name(lib),
                st.available ? st.detail.c_str() : "unavailable: ", st.available ? "" : st.note.c_str());
  }
  bool bf16_onednn = true;
  try {
    ft::cpu::gemm_primitive_impl_name(64, 64, 64, false, false, Precision::kBF16);
  } catch (const std::exception&) {
    bf16_onednn = false;
  }
  std::printf("  bf16: %s\n\n",
              ft::cpu::onednn_has_native_bf16() ? "native" : ("emulated: " + ft::cpu::bf16_emulation_reason()).c_str());
  constexpr int kImpls = 6;
  const char* names[kImpls] = {"onednn", "openblas", "blis", "f32 prim", "bf16 op", "bf16 dnnl"};
  std::printf("%-8s %5s %5s %5s %2s %2s %4s |", "layer", "M", "N", "K", "tA", "tB", "beta");
  for (const char* n : names) std::printf(" %9s", n);
  std::printf("\n");
  double flops_total = 0, secs_total[kImpls] = {};
  for (const ft::GemmShape& s : shapes) {
    auto A = std::vector<float>(s.M * s.K), B = std::vector<float>(s.K * s.N);
    for (size_t i = 0; i < A.size(); ++i) A[i] = static_cast<float>(i % 13) * 0.07f - 0.4f;
    for (size_t i = 0; i < B.size(); ++i) B[i] = static_cast<float>(i % 11) * 0.05f - 0.25f;
    std::vector<uint16_t> A16(A.size()), B16(B.size());
    ft::convert(A16.data(), ft::DType::kBF16, A.data(), ft::DType::kF32, A.size());
    ft::convert(B16.data(), ft::DType::kBF16, B.data(), ft::DType::kF32, B.size());
    std::vector<float> Cm(s.M * s.N, 0.0f);
    double fl = 2.0 * s.M * s.N * s.K;
    double t[kImpls] = {};
    for (GemmLibrary lib : ft::cpu::kGemmLibraries) {
      if (!have[static_cast<int>(lib)]) continue;
      t[static_cast<int>(lib)] = best_seconds([&] {
        ft::cpu::matmul_f32_with(lib, Cm.data(), A.data(), B.data(), s.M, s.N, s.K, s.trans_a, s.trans_b, s.beta);
      });
    }
    t[3] = best_seconds([&] {
      ft::cpu::matmul_f32_primitive(Cm.data(), A.data(), B.data(), s.M, s.N, s.K, s.trans_a, s.trans_b, s.beta);
    });
    t[4] = best_seconds([&] {
      ft::cpu::matmul_bf16(ft::cpu_context(), Cm.data(), A16.data(), B16.data(), s.M, s.N, s.K, s.trans_a, s.trans_b,
                           s.beta);
    });
    if (bf16_onednn)
      t[5] = best_seconds([&] {
        ft::cpu::matmul_bf16_onednn(Cm.data(), A16.data(), B16.data(), s.M, s.N, s.K, s.trans_a, s.trans_b, s.beta);
      });
    std::printf("%-8s %5lld %5lld %5lld %2d %2d %4.0f |", s.name.c_str(), static_cast<long long>(s.M),
                static_cast<long long>(s.N), static_cast<long long>(s.K), s.trans_a, s.trans_b, s.beta);
    for (int i = 0; i < kImpls; ++i) {
      if (t[i] > 0)
        std::printf(" %9.1f", fl / t[i] * 1e-9);
      else
        std::printf(" %9s", "-");
      secs_total[i] += t[i];
    }
    std::printf("\n");
    flops_total += fl;
  }
  double mix[kImpls];
  std::printf("%-37s |", "FLOP-weighted mix");
  for (int i = 0; i < kImpls; ++i) {
    mix[i] = secs_total[i] > 0 ? flops_total / secs_total[i] * 1e-9 : 0.0;
    if (mix[i] > 0)
      std::printf(" %9.1f", mix[i]);
    else
      std::printf(" %9s", "-");
  }
  std::printf("\n\n");
  ft::PeakOptions opt;
  opt.cpu_clock = g_cpu_clock;
  opt.min_seconds = 0.5;
  double peak32 = ft::measure_f32_library(GemmLibrary::kOneDnn, omp_get_max_threads(), opt).gflops;
  double peak16 = ft::measure_gemm_peak(Precision::kBF16, omp_get_max_threads(), opt).gflops;
  std::printf("square 2048^3 peak: f32 onednn %.1f, bf16 (ops::matmul_bf16) %.1f GFLOP/s\n", peak32, peak16);
  std::printf("mix f32 matmul primitive / onednn sgemm: %.2f\n", mix[3] / mix[0]);
  if (mix[1] > 0) std::printf("mix f32 openblas / onednn sgemm: %.2f\n", mix[1] / mix[0]);
  if (mix[2] > 0) std::printf("mix f32 blis / onednn sgemm: %.2f\n", mix[2] / mix[0]);
  if (mix[5] > 0) std::printf("mix bf16 oneDNN primitive / bf16 op: %.2f\n", mix[5] / mix[4]);
  std::printf("mix bf16 op (operands in bf16) / f32 onednn sgemm: %.2f\n", mix[4] / mix[0]);
  std::printf("mix / square peak: f32 %.2f, bf16 %.2f\n", mix[0] / peak32, mix[4] / peak16);
  return 0;
}

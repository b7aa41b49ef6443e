#include "backends/cpu/native_precision.h"

#include <fmt/format.h>

#include <dnnl.hpp>

#include "util/cpu_info.h"

namespace ft::cpu {

std::string onednn_isa_name() {
  using dnnl::cpu_isa;
  switch (dnnl::get_effective_cpu_isa()) {
    case cpu_isa::sse41:
      return "sse41";
    case cpu_isa::avx:
      return "avx";
    case cpu_isa::avx2:
      return "avx2";
    case cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case cpu_isa::avx512_core:
      return "avx512_core";
    case cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return fmt::format("isa 0x{:x}", static_cast<unsigned>(dnnl::get_effective_cpu_isa()));
  }
}

bool onednn_has_native_bf16() {
  using dnnl::cpu_isa;
  const cpu_isa isa = dnnl::get_effective_cpu_isa();
  return isa == cpu_isa::avx512_core_bf16 || isa == cpu_isa::avx512_core_amx;
}

std::string native_bf16_flags(std::string* why) {
  const CpuInfo& c = cpu_info();
  const std::string flags = c.amx_bf16 ? "amx_bf16" : c.avx512_bf16 ? "avx512_bf16" : "";
  if (flags.empty()) {
    *why = "the CPU has neither AVX512-BF16 nor AMX";
    return "";
  }
  if (!onednn_has_native_bf16()) {
    *why = fmt::format("the CPU has {} but oneDNN is limited to {} (ONEDNN_MAX_CPU_ISA)", flags, onednn_isa_name());
    return "";
  }
  return flags;
}

std::string at_threads(int threads) {
  return fmt::format("at {} thread{}", threads, threads == 1 ? "" : "s");
}

PrecisionChoice native_precision_guess() {
  std::string why;
  const std::string flags = native_bf16_flags(&why);
  if (flags.empty()) return {Precision::kF32, "auto: " + why};
  return {Precision::kBF16, fmt::format("auto: the CPU has {} (not yet measured)", flags)};
}

PrecisionChoice choose_auto_precision(const std::string& native_flags, double bf16_gflops, double f32_gflops,
                                      int threads) {
  if (native_flags.empty()) return {Precision::kF32, "auto: no native bf16 GEMM here"};
  const std::string figures = fmt::format("{} bf16 GEMM {:.0f} GFLOP/s vs fp32 {:.0f} GFLOP/s {} (peak file)",
                                          native_flags, bf16_gflops, f32_gflops, at_threads(threads));
  if (bf16_gflops >= kBf16Margin * f32_gflops) return {Precision::kBF16, "auto: bf16 is faster here: " + figures};
  return {Precision::kF32, fmt::format("auto: bf16 is not measurably faster here (needs {:.0f}% over fp32): {}",
                                       (kBf16Margin - 1) * 100, figures)};
}

}  // namespace ft::cpu

// Which GEMM precisions this CPU runs natively, as oneDNN sees it (its effective ISA respects
// ONEDNN_MAX_CPU_ISA), the precision `train.precision = "auto"` picks (by the measured GEMM
// peaks), and the peak MFU is reported against.
//
//   PrecisionChoice c = ft::cpu::auto_precision(omp_get_max_threads());   // backends/cpu/peak.h
//   log_info("precision {} ({})", precision_label(c.precision), c.reason);
#pragma once

#include <string>

#include "kernels/ops.h"

namespace ft::cpu {

// oneDNN's effective instruction set, e.g. "avx512_core_amx", "avx512_core_bf16", "avx2".
std::string onednn_isa_name();

// True when oneDNN may use AVX512-BF16 or AMX here (native bf16 dot products).
bool onednn_has_native_bf16();

// PrecisionChoice: tensor/precision.h (one type for every backend's "auto").
// The guess made without measuring, when the config is read (the dry run and the planner use
// it): bf16 where the CPU has AVX512-BF16 or AMX and oneDNN may use them, fp32 elsewhere.
PrecisionChoice native_precision_guess();

// "amx_bf16" / "avx512_bf16" when oneDNN may use native bf16 here, else "" (the reason in *why).
std::string native_bf16_flags(std::string* why);
// "at 1 thread", "at 2 threads".
std::string at_threads(int threads);

// bf16 must beat fp32's GEMM peak by this factor for "auto" to choose it (cpu::auto_precision in
// backends/cpu/peak.h measures; AVX512-BF16 without AMX can be slower than fp32: Emerald Rapids
// without AMX, 81 vs 151 GFLOP/s on one thread).
inline constexpr double kBf16Margin = 1.10;

// The decision from the measured peaks. native_flags: "amx_bf16", "avx512_bf16", or "" (no native
// bf16: fp32 without a measurement; bf16_gflops is then ignored).
PrecisionChoice choose_auto_precision(const std::string& native_flags, double bf16_gflops, double f32_gflops,
                                      int threads);

}  // namespace ft::cpu

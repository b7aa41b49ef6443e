// Which GEMM precisions this CPU runs natively, as oneDNN sees it (its effective ISA respects
// ONEDNN_MAX_CPU_ISA), and the precision `train.precision = "auto"` picks from that.
//
//   PrecisionChoice c = ft::cpu::auto_precision();
//   log_info("precision {} ({})", precision_label(c.precision), c.reason);
#pragma once

#include <string>

#include "kernels/ops.h"

namespace ft::cpu {

// oneDNN's effective instruction set, e.g. "avx512_core_amx", "avx512_core_bf16", "avx2".
std::string onednn_isa_name();

// True when oneDNN may use AVX512-BF16 or AMX here (native bf16 dot products).
bool onednn_has_native_bf16();

struct PrecisionChoice {
  Precision precision = Precision::kF32;
  std::string reason;  // "the CPU has avx512_bf16 (oneDNN avx512_core_bf16)"
};

// bf16 where the CPU has AVX512-BF16 or AMX and oneDNN may use them, fp32 elsewhere.
PrecisionChoice auto_precision();

}  // namespace ft::cpu

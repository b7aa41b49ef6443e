// Precision: what a run's GEMMs compute in — the one type the config, the trainer, every backend
// (its "auto" choice and its peak), the ops and the planner use — and the choice "auto" makes
// with its reason.
//
//   PrecisionChoice c = backend.auto_precision(ctx, threads);   // tensor/backend.h
//   log_info("precision {} ({})", precision_label(c.precision), c.reason);
#pragma once

#include <cstdint>
#include <string>

namespace ft {

enum class Precision : uint8_t {
  kF32 = 0,   // fp32 everywhere
  kBF16 = 1,  // GEMM inputs rounded to bf16 (AMX / AVX512-BF16), fp32 accumulation and output
  kF16 = 2,   // GEMM inputs rounded to fp16, fp32 accumulation and output (loss scaling needed)
  kF8 = 3,    // fp8 GEMMs: priced by the planner (fluxtrain plan --precision fp8); no backend trains in it
};

// "fp32", "bf16", "fp16" (the spelling of train.precision), "fp8" (the planner's).
constexpr const char* precision_label(Precision p) {
  return p == Precision::kBF16 ? "bf16" : p == Precision::kF16 ? "fp16" : p == Precision::kF8 ? "fp8" : "fp32";
}

// train.precision = "auto" decided on a device: the precision and why.
struct PrecisionChoice {
  Precision precision = Precision::kF32;
  std::string reason;  // "auto: bf16 GEMM 1820 GFLOP/s vs fp32 310 GFLOP/s at 2 threads (peak file)"
};

// The GPU rule of "auto": bf16 on a device of compute capability 8.0 or newer (bf16 tensor
// cores), fp32 below. `device` names the kind ("cuda"); major.minor is the device's capability.
PrecisionChoice gpu_auto_precision(const char* device, int cc_major, int cc_minor);

}  // namespace ft

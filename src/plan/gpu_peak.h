// MFU's denominator on a GPU: the dense peak of the rank's GPU at the run's precision, from the
// planner's catalog (catalog.h), found by the product name NVML or CUDA reports for the device.
//
//   MfuPeak p = gpu_mfu_peak("NVIDIA H100 80GB HBM3", Precision::kBF16, /*measured_flops=*/0);
//   p.flops;    // 989.4e12
//   p.source;   // "NVIDIA H100 80GB HBM3 = h100-sxm: 989.4 TFLOP/s dense bf16 (the planner's catalog)"
//   double u = mfu(tokens_per_s, flops_per_token, p.flops, world_size);
//
// A GPU the catalog does not know: the measured GEMM peak when one is given (> 0), else
// flops = 0 and `source` says why MFU is unavailable (the trainer logs it once).
#pragma once

#include <cstdint>
#include <string>

#include "plan/catalog.h"

namespace ft::plan {

// The catalog entry of a device's product name as NVML/CUDA report it ("NVIDIA A100-SXM4-80GB",
// "NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA B200"); "" when the catalog has no such GPU
// (its peaks would be a guess: H200 NVL, L40S, RTX cards ...).
std::string catalog_gpu_for_device(const std::string& device_name);

struct MfuPeak {
  double flops = 0;    // FLOP/s of one GPU; 0 = MFU unavailable
  std::string source;  // where the figure comes from, or why there is none
};

MfuPeak gpu_mfu_peak(const std::string& device_name, Precision precision, double measured_flops);

// Model FLOP utilisation: job-wide tokens/s × model FLOPs per token over the peak of all ranks;
// 0 when the peak is unknown.
double mfu(double tokens_per_s, double flops_per_token, double peak_flops_per_rank, int64_t ranks);

}  // namespace ft::plan

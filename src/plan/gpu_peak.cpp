#include "plan/gpu_peak.h"

#include <fmt/format.h>

#include <cctype>

namespace ft::plan {

std::string catalog_gpu_for_device(const std::string& device_name) {
  std::string t = device_name;
  for (auto& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // Variants with their own (lower) clocks that the catalog lacks: no borrowed peak for them.
  if (t.find("h200") != std::string::npos && t.find("nvl") != std::string::npos) return "";
  if (t.find("h20") != std::string::npos && t.find("h200") == std::string::npos) return "";
  return gpu_name_from_description(device_name);
}

MfuPeak gpu_mfu_peak(const std::string& device_name, Precision precision, double measured_flops) {
  MfuPeak p;
  const std::string entry = catalog_gpu_for_device(device_name);
  if (!entry.empty()) {
    const GpuSpec g = find_gpu(entry);
    if (const double f = g.peak_or_zero(precision); f > 0) {
      p.flops = f;
      p.source = fmt::format("{} = {}: {:.1f} TFLOP/s dense {} (the planner's catalog)", device_name, entry, f / 1e12,
                             precision_label(precision));
      return p;
    }
  }
  const std::string why =
      entry.empty() ? fmt::format("'{}' is not in the planner's catalog", device_name)
                    : fmt::format("{} has no dense {} peak in the catalog", entry, precision_label(precision));
  if (measured_flops > 0) {
    p.flops = measured_flops;
    p.source = fmt::format("{}: the measured GEMM peak, {:.1f} TFLOP/s {}", why, measured_flops / 1e12,
                           precision_label(precision));
    return p;
  }
  p.source = fmt::format("MFU unavailable: {} and no GEMM peak was measured on it (metrics record mfu 0)",
                         device_name.empty() ? "the GPU's name is unknown" : why);
  return p;
}

double mfu(double tokens_per_s, double flops_per_token, double peak_flops_per_rank, int64_t ranks) {
  if (!(peak_flops_per_rank > 0) || ranks <= 0) return 0;
  return tokens_per_s * flops_per_token / (peak_flops_per_rank * static_cast<double>(ranks));
}

}  // namespace ft::plan

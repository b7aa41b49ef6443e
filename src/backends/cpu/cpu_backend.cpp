// The CPU's Backend (tensor/backend.h): its ops (op_table.cpp), what it logs, MFU's peak (the
// measured GEMM peak, peak.h), "auto" (the measured peaks, native_precision.h; before measuring,
// the CPU's flags) and its threads (every usable CPU computes: host_share). Its runtime and memory
// are the host's, built into tensor/.
#include <fmt/format.h>

#include "backends/cpu/gemm.h"
#include "backends/cpu/native_precision.h"
#include "backends/cpu/peak.h"
#include "kernels/ops.h"
#include "tensor/backend.h"
#include "util/cpu_info.h"

namespace ft {
namespace {

std::string describe(const ExecContext&) {
  return fmt::format("CPU {}: {}; oneDNN uses {}\nGEMM {}", cpu_info().model, cpu_info().describe(),
                     cpu::onednn_isa_name(), cpu::gemm_backend_summary());
}

// The fastest precision's GEMM peak on this CPU, whatever precision runs: an MFU then means the
// same on every CPU, and a slow precision is not flattered by its own low peak.
PeakFlops peak_flops(const ExecContext&, Precision, int threads) {
  const cpu::FastestPeak f = cpu::fastest_gemm_peak(threads);
  return {f.gflops * 1e9, "MFU against " + f.describe, peak_file_path()};
}

PrecisionChoice auto_precision(const ExecContext&, int threads) {
  return cpu::auto_precision(threads);
}

}  // namespace

const Backend& cpu_backend() {
  static const Backend b{.device = Device::kCPU,
                         .ops = &cpu::kOpTable,
                         .runtime = {},
                         .memory = {},
                         .describe = describe,
                         .peak_flops = peak_flops,
                         .auto_precision = auto_precision,
                         .guess_precision = cpu::native_precision_guess,
                         .threads = host_share};
  return b;
}

}  // namespace ft

// The roofline price of a recorded op trace (plan/op_trace.h) on one GPU: each op's time from
// what it moves and computes, the step's time by op, its non-GEMM share and the MFU it predicts.
// Only the H200 has a roofline today (h200_roofline(): every figure, its source and its
// assumptions are stated in roofline.cpp and docs/kernels.md, "Reading a step trace").
//
//   plan::Roofline r = plan::h200_roofline();
//   double s = plan::price_op(record, r);              // seconds of one op call
//   plan::StepPrice p = plan::price_step(trace, r);     // by op, GEMM share, predicted MFU (+ exposed cp)
//   fmt::print("{}", plan::format_step_price(p));
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "plan/op_trace.h"

namespace ft::plan {

struct Roofline {
  std::string gpu;            // "h200"
  double peak_bf16 = 0;       // dense 16-bit tensor-core FLOP/s (MFU's denominator)
  double peak_fp32 = 0;       // fp32 FLOP/s of the CUDA cores (no tensor cores)
  double hbm = 0;             // device-memory bytes/s an op reaches at best
  double gemm_cap = 0;        // 16-bit GEMM FLOP/s of a large square GEMM (8192³)
  double gemm_fp32_eff = 0;   // fp32 GEMMs (CUDA cores): fraction of peak_fp32 at 8192³
  double flash_fp32_eff = 0;  // the fp32 flash attention kernels: fraction of peak_fp32
  int sms = 0;                // streaming multiprocessors (GEMM wave quantisation)
  double launch_s = 0;        // per kernel launch (a kernel never takes less)
  double pcie = 0;            // host <-> device bytes/s
  double pcie_latency_s = 0;  // per host <-> device copy
  double serial_s = 0;        // per element a single thread adds in order (OpKind::kSerial)
  double link = 0;            // bytes/s of a transfer to another GPU of the node (NVLink: the cp group's)
};

Roofline h200_roofline();

// The fraction of gemm_cap a GEMM of this shape reaches (1 at 8192³; less for skinny or small
// shapes: wave quantisation over the SMs and the K loop's fixed cost, roofline.cpp).
double gemm_efficiency(int64_t M, int64_t N, int64_t K, const Roofline& r);
// cuDNN SDPA's published BF16 rate (FLOP/s, causal FLOPs) at head dim D and sequence length T.
double sdpa_rate(int64_t D, int64_t T, bool backward);
// Seconds of one op call.
double price_op(const OpRecord& op, const Roofline& r);

// Calls of one op name (or one GEMM shape), summed.
struct OpGroup {
  std::string name;  // op name; for a GEMM shape: "matmul_bf16 M=.. N=.. K=.."
  int64_t calls = 0;
  double bytes = 0, flops = 0, seconds = 0;
  bool gemm = false;
};

struct StepPrice {
  std::string gpu;
  std::vector<OpGroup> by_op;  // by op name, most time first
  std::vector<OpGroup> gemms;  // GEMMs by shape, most time first
  double seconds = 0, gemm_seconds = 0;
  double model_flops = 0, peak = 0;  // MFU = model_flops / seconds / peak
  double mfu = 0;
  int64_t tokens = 0, kernels = 0;
  double peak_device_bytes = 0;
  // Context parallelism (OpTrace::cp_bytes > 0): the cp group's bytes over the link, and what of it
  // the step waits for — all but the ring's key/value transfers hidden behind the block attention
  // each runs beside (min(transfer, block), OpRecord::overlapped_send_bytes). `seconds` includes it.
  double cp_bytes = 0, cp_seconds = 0, cp_exposed = 0;
  double non_gemm_share() const { return seconds > 0 ? 1 - gemm_seconds / seconds : 0; }
};

StepPrice price_step(const OpTrace& trace, const Roofline& r);
std::string format_step_price(const StepPrice& p);
nlohmann::json to_json(const StepPrice& p);

}  // namespace ft::plan

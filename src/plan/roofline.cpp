// The H200 roofline. Every figure below is either the catalog's datasheet value (plan/catalog.cpp),
// a published measurement (cited), or an assumption said to be one; the first GPU run
// (scripts/gpu_check.sh) replaces the assumptions with measurements, op by op.
#include "plan/roofline.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "plan/catalog.h"
#include "util/strings.h"

namespace ft::plan {
namespace {

double ceil_div(double a, double b) {
  return std::ceil(a / b);
}

// The shape factor of a 16-bit GEMM on cuBLASLt's Hopper kernels, before normalising to 8192³:
//   - wave quantisation: output tiles of 128 × 256 (the larger output side along 256), one CTA
//     of a tile per SM at a time; the last wave of tiles leaves SMs idle;
//   - the K loop's fixed cost: a tile's prologue and epilogue (its fp32 C written once) cost
//     about as much as 256 more elements of K (an assumption, not a measurement).
double shape_factor(int64_t M, int64_t N, int64_t K, int sms) {
  const double big = static_cast<double>(std::max(M, N)), small = static_cast<double>(std::min(M, N));
  const double tiles = ceil_div(big, 256) * ceil_div(small, 128);
  const double wave = tiles / (ceil_div(tiles, sms) * sms);
  const double k = static_cast<double>(K);
  return wave * k / (k + 256);
}

// cuDNN SDPA (flash attention, BF16) on an H100 SXM5, TFLOP/s counted as FlashAttention counts
// them (causal: half the full FLOPs; backward 2.5× forward), at sequence lengths 512 .. 16k, from
// the cuDNN bars of Shah et al., "FlashAttention-3: Fast and Accurate Attention with Asynchrony
// and Low-precision" (https://arxiv.org/abs/2407.08608, Figures 5 and 6: forward and backward
// speed, head dims 64 and 128). The H200 has the H100's SMs and clocks (its HBM is faster), and
// attention at these lengths is compute-bound, so the H100 rates stand for it. NVIDIA's own
// figures for cuDNN 9 SDPA on the H200
// (https://developer.nvidia.com/blog/accelerating-transformers-with-nvidia-cudnn-9/) are charts without a table; they
// are of the same order.
constexpr std::array<double, 6> kSdpaT = {512, 1024, 2048, 4096, 8192, 16384};
constexpr std::array<double, 6> kSdpaFwd64 = {335, 373, 395, 408, 412, 413};
constexpr std::array<double, 6> kSdpaBwd64 = {266, 348, 395, 417, 432, 433};
constexpr std::array<double, 6> kSdpaFwd128 = {497, 574, 617, 609, 600, 595};
constexpr std::array<double, 6> kSdpaBwd128 = {305, 408, 465, 499, 518, 516};

// Linear in log2(T) between the table's lengths, held flat outside them.
double along_t(const std::array<double, 6>& rate, int64_t T) {
  const double x = std::log2(std::clamp(static_cast<double>(T), kSdpaT.front(), kSdpaT.back()));
  for (size_t i = 0; i + 1 < kSdpaT.size(); ++i) {
    const double a = std::log2(kSdpaT[i]), b = std::log2(kSdpaT[i + 1]);
    if (x <= b) return rate[i] + (rate[i + 1] - rate[i]) * (x - a) / (b - a);
  }
  return rate.back();
}

}  // namespace

Roofline h200_roofline() {
  const GpuSpec g = find_gpu("h200");
  Roofline r;
  r.gpu = g.name;
  r.peak_bf16 = g.peak_bf16;  // 989.4 TFLOP/s dense (datasheet)
  r.peak_fp32 = g.peak_fp32;  // 67 TFLOP/s (datasheet)
  // 83% of the 4.8 TB/s datasheet HBM3e bandwidth: what a streaming kernel reaches at best.
  r.hbm = 4.0e12;
  // A large square bf16 GEMM (8192³) on the H200 with cuBLASLt: about 80% of the dense peak (the
  // figure issue 28 sets; gpu_check's cuBLASLt 8192³ ceiling measures it on the first run).
  r.gemm_cap = 790e12;
  // cuBLAS SGEMM (fp32 on the CUDA cores, no TF32) at 8192³: 75% of the fp32 peak (assumption).
  r.gemm_fp32_eff = 0.75;
  // Our fp32 flash kernels (backends/cuda/attention.cu) are scalar: a warp per query row, every
  // multiply-add of q·k waiting on two shared-memory loads (k from the tile, q broadcast) and
  // every one of P·v on one load and a shuffle. An SM's shared memory serves 32 4-byte words per
  // clock against 128 fp32 FMAs, so the dot products run at most at 1/8 and the updates at 1/4
  // of the FMA peak; with the causal diagonal's idle lanes and the exp2 per score, 10% of the fp32
  // peak (6.7 TFLOP/s) is the estimate — a bound-based guess, measured by gpu_check stage 1.
  r.flash_fp32_eff = 0.10;
  r.sms = 132;
  // A kernel launch on the stream, back to back (no CUDA graph): ~3 µs each, the usual figure for
  // launch overhead plus the tail of a short kernel (assumption).
  r.launch_s = 3e-6;
  r.pcie = 50e9;  // PCIe Gen5 x16, what pinned copies reach (~80% of 64 GB/s)
  r.pcie_latency_s = 10e-6;
  // One thread adding in order: a dependent fp64 add and a load per element, ~10 clocks at 1.98 GHz.
  r.serial_s = 5e-9;
  // A cp group inside the node: NVLink at the catalog's collective efficiency, as the planner
  // prices it (plan/context_parallel.h: 450 GB/s a direction × the catalog's collective efficiency).
  r.link = g.nvlink_bw * g.eff.collective;
  return r;
}

double gemm_efficiency(int64_t M, int64_t N, int64_t K, const Roofline& r) {
  return std::min(1.0, shape_factor(M, N, K, r.sms) / shape_factor(8192, 8192, 8192, r.sms));
}

double sdpa_rate(int64_t D, int64_t T, bool backward) {
  const double r64 = along_t(backward ? kSdpaBwd64 : kSdpaFwd64, T);
  const double r128 = along_t(backward ? kSdpaBwd128 : kSdpaFwd128, T);
  double tflops = 0;
  if (D >= 128)
    tflops = r128;
  else if (D >= 64)
    tflops = r64 + (r128 - r64) * static_cast<double>(D - 64) / 64;
  else  // below the published head dims: the 64 rate scaled down with the head dim (a guess)
    tflops = r64 * static_cast<double>(D) / 64;
  return tflops * 1e12;
}

double price_op(const OpRecord& op, const Roofline& r) {
  const double launches = op.kernels + op.side_kernels;
  const double side = op.side_bytes / r.hbm;
  const double memory = op.bytes() / r.hbm;
  switch (op.kind) {
    case OpKind::kGemm: {
      const GemmShape& g = op.gemm;
      const double eff = gemm_efficiency(g.M, g.N, g.K, r);
      const double rate = g.precision == Precision::kF32 ? r.peak_fp32 * r.gemm_fp32_eff * eff : r.gemm_cap * eff;
      return std::max(op.flops / rate, memory) + side + launches * r.launch_s;
    }
    case OpKind::kFlashFp32:
      return std::max(op.flops / (r.peak_fp32 * r.flash_fp32_eff), memory) + side + launches * r.launch_s;
    case OpKind::kSdpa: {
      const AttentionShape& a = op.attention;
      return std::max(op.flops / sdpa_rate(a.D, a.T, a.backward), memory) + side + launches * r.launch_s;
    }
    case OpKind::kSerial:
      return std::max(static_cast<double>(op.serial) * r.serial_s, memory) + launches * r.launch_s;
    case OpKind::kCopyH2D:
    case OpKind::kCopyD2H:
      return op.bytes() / r.pcie + r.pcie_latency_s;
    case OpKind::kElementwise:
    case OpKind::kFill:
    case OpKind::kCopyD2D:
      break;
  }
  return std::max(memory, op.flops / r.peak_fp32) + side + launches * r.launch_s;
}

StepPrice price_step(const OpTrace& trace, const Roofline& r) {
  StepPrice p;
  p.gpu = r.gpu;
  std::map<std::string, OpGroup> by_op, gemms;
  double cp_hidden = 0;  // the ring's key/value transfers, each up to the block attention it runs beside
  for (const OpRecord& op : trace.ops) {
    const double s = price_op(op, r);
    if (op.overlapped_send_bytes > 0 && r.link > 0) cp_hidden += std::min(op.overlapped_send_bytes / r.link, s);
    const bool gemm = op.kind == OpKind::kGemm;
    for (auto [groups, key] : {std::pair{&by_op, op.op}, {&gemms, op.op + " " + op.shape}}) {
      if (groups == &gemms && !gemm) continue;
      OpGroup& g = (*groups)[key];
      g.name = key;
      g.gemm = gemm;
      g.calls++;
      g.bytes += op.bytes() + op.side_bytes;
      g.flops += op.flops;
      g.seconds += s;
    }
    p.seconds += s;
    if (gemm) p.gemm_seconds += s;
    p.kernels += op.kernels + op.side_kernels;
  }
  auto sorted = [](const std::map<std::string, OpGroup>& m) {
    std::vector<OpGroup> v;
    for (const auto& [k, g] : m) v.push_back(g);
    std::stable_sort(v.begin(), v.end(), [](const OpGroup& a, const OpGroup& b) { return a.seconds > b.seconds; });
    return v;
  };
  p.by_op = sorted(by_op);
  p.gemms = sorted(gemms);
  if (trace.cp_bytes > 0 && r.link > 0) {
    p.cp_bytes = trace.cp_bytes;
    p.cp_seconds = trace.cp_bytes / r.link;
    p.cp_exposed = std::max(0.0, p.cp_seconds - cp_hidden);
    p.seconds += p.cp_exposed;  // the ops run on one stream; the step waits for the exposed transfers too
  }
  p.model_flops = trace.model_flops;
  p.tokens = trace.tokens;
  p.peak = trace.precision == Precision::kF32 ? r.peak_fp32 : r.peak_bf16;
  p.mfu = p.seconds > 0 && p.peak > 0 ? p.model_flops / p.seconds / p.peak : 0;
  p.peak_device_bytes = trace.peak_device_bytes;
  return p;
}

std::string format_step_price(const StepPrice& p) {
  std::string out = fmt::format("{:<24} {:>7} {:>10} {:>10} {:>11} {:>7}\n", "op", "calls", "GB moved", "TFLOP",
                                "priced ms", "share");
  auto row = [&](const OpGroup& g) {
    return fmt::format("{:<24} {:>7} {:>10.2f} {:>10.3f} {:>11.3f} {:>6.1f}%\n", g.name, g.calls, g.bytes / 1e9,
                       g.flops / 1e12, g.seconds * 1e3, p.seconds > 0 ? 100 * g.seconds / p.seconds : 0);
  };
  for (const OpGroup& g : p.by_op) out += row(g);
  if (p.cp_bytes > 0)
    out += fmt::format("{:<24} {:>7} {:>10.2f} {:>10} {:>11.3f} {:>6.1f}%\n", "cp transfers exposed", "",
                       p.cp_bytes / 1e9, "", p.cp_exposed * 1e3, p.seconds > 0 ? 100 * p.cp_exposed / p.seconds : 0);
  out += fmt::format("{:<24} {:>7} {:>10} {:>10} {:>11.3f} {:>6.1f}%\n", "total", p.kernels, "", "", p.seconds * 1e3,
                     100.0);
  out += "\nGEMMs by shape (calls, GB, TFLOP, ms, share of the step):\n";
  for (const OpGroup& g : p.gemms)
    out += fmt::format("  {:<60} {:>5} {:>8.2f} {:>8.3f} {:>9.3f} {:>5.1f}%\n", g.name, g.calls, g.bytes / 1e9,
                       g.flops / 1e12, g.seconds * 1e3, p.seconds > 0 ? 100 * g.seconds / p.seconds : 0);
  out += fmt::format(
      "\nstep {:.2f} ms on {} ({} kernels), GEMMs {:.2f} ms, non-GEMM share {:.1f}%\n"
      "model FLOPs {:.4g} ({} tokens) over {:.1f} TFLOP/s peak: predicted MFU {:.1f}%\n",
      p.seconds * 1e3, p.gpu, p.kernels, p.gemm_seconds * 1e3, 100 * p.non_gemm_share(), p.model_flops, p.tokens,
      p.peak / 1e12, 100 * p.mfu);
  if (p.peak_device_bytes > 0) out += fmt::format("device memory at its peak: {}\n", human_bytes(p.peak_device_bytes));
  if (p.cp_bytes > 0)
    out += fmt::format(
        "context parallelism: {} sent on the cp group ({:.0f} bytes, what --dry-run counts for this rank), {:.3f} ms "
        "over the link, {:.3f} ms exposed ({:.0f}% hidden behind the ring's block attention)\n",
        human_bytes(p.cp_bytes), p.cp_bytes, p.cp_seconds * 1e3, p.cp_exposed * 1e3,
        p.cp_seconds > 0 ? 100 * (1 - p.cp_exposed / p.cp_seconds) : 0);
  return out;
}

nlohmann::json to_json(const StepPrice& p) {
  auto groups = [](const std::vector<OpGroup>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (const OpGroup& g : v)
      a.push_back({{"name", g.name},
                   {"calls", g.calls},
                   {"bytes", g.bytes},
                   {"flops", g.flops},
                   {"seconds", g.seconds},
                   {"gemm", g.gemm}});
    return a;
  };
  return {{"gpu", p.gpu},
          {"step_seconds", p.seconds},
          {"gemm_seconds", p.gemm_seconds},
          {"non_gemm_share", p.non_gemm_share()},
          {"model_flops", p.model_flops},
          {"tokens", p.tokens},
          {"peak_flops", p.peak},
          {"predicted_mfu", p.mfu},
          {"kernels", p.kernels},
          {"peak_device_bytes", p.peak_device_bytes},
          {"cp_bytes", p.cp_bytes},
          {"cp_seconds", p.cp_seconds},
          {"cp_exposed_seconds", p.cp_exposed},
          {"by_op", groups(p.by_op)},
          {"gemms", groups(p.gemms)}};
}

}  // namespace ft::plan

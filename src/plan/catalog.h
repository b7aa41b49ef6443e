// The hardware catalog: what one accelerator can do (dense peak FLOP/s per precision, memory,
// memory/NVLink/network bandwidth) and how much of it training reaches (Efficiency, fitted
// once per GPU family and recalibratable with `fluxtrain plan --calibrate`).
//
//   ft::plan::GpuSpec g = ft::plan::find_gpu("a100-80gb");  // ft::Error listing known names
//   ft::plan::apply_gpu_overrides(g, "cluster.toml");       // [gpu] and [gpu.efficiency] keys
//   double flops = g.peak(ft::Precision::kBF16);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/precision.h"

namespace ft::plan {

// Precision is ft::Precision (tensor/precision.h), fp8 included; its name is precision_label.
Precision precision_from_name(const std::string& name);  // "fp32", "bf16", "fp16", "fp8"; throws ft::Error

// The achievable fractions that turn peak numbers into time. See docs/planner.md for how each
// enters the step time and how the catalog values were fitted.
struct Efficiency {
  double gemm = 0.7;       // fraction of the dense 16-bit (or fp32) peak reached by GEMMs
  double gemm_fp8 = 0.6;   // fraction of the fp8 peak reached by fp8 GEMMs
  double attention = 0.3;  // fraction of the 16-bit peak reached by fused (flash) attention
  // The same for fused attention written for Hopper's warpgroup MMA and TMA (cuDNN's fused flash
  // attention, FlashAttention-3): a job that says it runs one (Job::hopper_attention). GPUs
  // without those instructions (A100, V100) run such a kernel at `attention`.
  double attention_hopper = 0.3;
  double memory_traffic = 1.2;  // multiplier on the counted element-wise bytes (fusion quality)
  double collective = 0.8;      // fraction of link bandwidth reached by NCCL collectives
  double overlap = 1.0;         // fraction of the communication that hides behind compute when
                                // it can (collectives share SMs and memory bandwidth)
};

struct GpuSpec {
  std::string name;         // catalog key, e.g. "a100-80gb"
  std::string family;       // efficiency family: "a100", "h100", "b200", "v100", "cpu"
  std::string description;  // one line for tables
  double peak_fp32 = 0;     // dense FLOP/s (IEEE fp32, not TF32)
  double peak_bf16 = 0;
  double peak_fp16 = 0;
  double peak_fp8 = 0;  // 0: no fp8 support
  double peak_fp4 = 0;  // dense NVFP4 (block-scaled fp4, Blackwell); 0: none. MXFP8 runs at peak_fp8
  double memory_bytes = 0;
  double hbm_bw = 0;      // bytes/s
  double nvlink_bw = 0;   // bytes/s per GPU per direction inside a node
  double network_bw = 0;  // bytes/s per GPU per direction between nodes
  int64_t gpus_per_node = 8;
  // Network tiers: GPUs under one full-bisection pod (0: the whole cluster is one) and the
  // oversubscription of the spine between pods (Llama 3's cluster: pods of 3,072 GPUs, 1:7).
  int64_t pod_gpus = 0;
  double spine_oversubscription = 1;
  // One inter-node step of an NCCL collective and its fixed start (NCCL's tuning model,
  // src/graph/tuning.cc: network Simple-protocol hop ~14 us, base ~8.4 us).
  double network_hop_latency = 14e-6;
  double collective_base_latency = 8.4e-6;
  double runtime_reserved = 0;  // bytes held by the runtime (CUDA context, library workspaces)
  bool is_cpu = false;          // this machine: memory follows the trainer's exact accounting
  Efficiency eff;

  double peak(Precision p) const;  // throws ft::Error when the GPU lacks the precision
  double peak_or_zero(Precision p) const;
};

const std::vector<GpuSpec>& gpu_catalog();
std::vector<std::string> gpu_names();
// Case-insensitive; accepts aliases ("a100" = a100-80gb, "h100" = h100-sxm, "cpu"). Throws
// ft::Error listing the known names and the closest one.
GpuSpec find_gpu(const std::string& name);
// Maps a free-form description from a published record ("A100-SXM4-40GB (AWS p4d.24xlarge)",
// "B200 in GB200 NVL72") to a catalog name; "" when none matches.
std::string gpu_name_from_description(const std::string& text);

// This machine as a device: cores × per-core peaks (AVX-512 fp32, AMX bf16), memory from
// /proc/meminfo. Its Efficiency comes from `fluxtrain plan --calibrate`.
GpuSpec detect_cpu();

// Overrides from a TOML file:
//   [gpu]             base = "h100-sxm", name, peak_fp32_tflops, peak_bf16_tflops,
//                     peak_fp16_tflops, peak_fp8_tflops, peak_fp4_tflops, memory_gib, hbm_tbs, nvlink_gbs,
//                     network_gbs, gpus_per_node, runtime_reserved_gib, pod_gpus,
//                     spine_oversubscription, network_hop_latency_us
//   [gpu.efficiency]  gemm, gemm_fp8, attention, attention_hopper, memory_traffic, collective, overlap
// `base` (if present) replaces g first. Unknown keys are errors naming the closest key.
void apply_gpu_overrides(GpuSpec& g, const std::string& toml_path);

}  // namespace ft::plan

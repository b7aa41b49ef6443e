// MFU on GPUs: the device name NVML/CUDA reports → the planner's catalog → the dense peak, and
// the MFU arithmetic, against hand-computed values.
#include <gtest/gtest.h>

#include "plan/gpu_peak.h"

namespace ft::plan {
namespace {

TEST(GpuPeak, DeviceNamesAsNvmlReportsThem) {
  const std::pair<const char*, const char*> cases[] = {
      {"NVIDIA A100-SXM4-80GB", "a100-80gb"},
      {"NVIDIA A100-SXM4-40GB", "a100-40gb"},
      {"NVIDIA A100-PCIE-40GB", "a100-pcie"},
      {"NVIDIA A100 80GB PCIe", "a100-pcie"},
      {"NVIDIA H100 80GB HBM3", "h100-sxm"},
      {"NVIDIA H100 PCIe", "h100-pcie"},
      {"NVIDIA H100 NVL", "h100-nvl"},
      {"NVIDIA H800", "h800"},
      {"NVIDIA H200", "h200"},
      {"NVIDIA B200", "b200"},
      {"NVIDIA GB200", "gb200"},
      {"Tesla V100-SXM2-32GB", "v100-32gb"},
      {"NVIDIA H200 NVL", ""},  // lower clocks than the H200 SXM: not borrowed
      {"NVIDIA H20", ""},
      {"NVIDIA L40S", ""},
      {"NVIDIA GeForce RTX 4090", ""},
      {"", ""},
  };
  for (const auto& [device, entry] : cases) EXPECT_EQ(catalog_gpu_for_device(device), entry) << device;
}

TEST(GpuPeak, CatalogPeakByPrecision) {
  MfuPeak p = gpu_mfu_peak("NVIDIA H100 80GB HBM3", Precision::kBF16, 123e12);  // the catalog wins
  EXPECT_DOUBLE_EQ(p.flops, 989.4e12);
  EXPECT_EQ(p.source, "NVIDIA H100 80GB HBM3 = h100-sxm: 989.4 TFLOP/s dense bf16 (the planner's catalog)");
  EXPECT_DOUBLE_EQ(gpu_mfu_peak("NVIDIA H100 80GB HBM3", Precision::kF32, 0).flops, 67e12);  // IEEE fp32, not TF32
  EXPECT_DOUBLE_EQ(gpu_mfu_peak("NVIDIA A100-SXM4-80GB", Precision::kF16, 0).flops, 312e12);
  EXPECT_DOUBLE_EQ(gpu_mfu_peak("NVIDIA H200", Precision::kBF16, 0).flops, 989.4e12);
  EXPECT_DOUBLE_EQ(gpu_mfu_peak("NVIDIA B200", Precision::kBF16, 0).flops, 2250e12);
}

TEST(GpuPeak, UnknownGpuTakesTheMeasuredPeakElseUnavailable) {
  MfuPeak m = gpu_mfu_peak("NVIDIA L40S", Precision::kBF16, 250e12);
  EXPECT_DOUBLE_EQ(m.flops, 250e12);
  EXPECT_EQ(m.source, "'NVIDIA L40S' is not in the planner's catalog: the measured GEMM peak, 250.0 TFLOP/s bf16");
  MfuPeak none = gpu_mfu_peak("NVIDIA L40S", Precision::kBF16, 0);
  EXPECT_EQ(none.flops, 0);
  EXPECT_EQ(none.source.rfind("MFU unavailable: 'NVIDIA L40S' is not in the planner's catalog", 0), 0u) << none.source;
  // A V100 has no bf16 tensor cores: no catalog peak for bf16.
  MfuPeak v = gpu_mfu_peak("Tesla V100-SXM2-32GB", Precision::kBF16, 0);
  EXPECT_EQ(v.flops, 0);
  EXPECT_NE(v.source.find("v100-32gb has no dense bf16 peak"), std::string::npos) << v.source;
  EXPECT_NE(gpu_mfu_peak("", Precision::kBF16, 0).source.find("the GPU's name is unknown"), std::string::npos);
}

TEST(GpuPeak, MfuArithmetic) {
  // 8 H100s in bf16 at 24,000 tokens/s job-wide, 42 GFLOP per token:
  // 24000 × 4.2e10 / (8 × 989.4e12) = 1.008e15 / 7.9152e15 = 0.1273499...
  const double peak = gpu_mfu_peak("NVIDIA H100 80GB HBM3", Precision::kBF16, 0).flops;
  EXPECT_NEAR(mfu(24000, 4.2e10, peak, 8), 0.12734990903577925, 1e-15);
  // 2 A100s in fp32 at 1500 tokens/s, 12 GFLOP per token: 1.8e13 / 3.9e13 = 0.461538...
  EXPECT_NEAR(mfu(1500, 1.2e10, gpu_mfu_peak("NVIDIA A100-SXM4-80GB", Precision::kF32, 0).flops, 2),
              0.46153846153846156, 1e-15);
  EXPECT_EQ(mfu(24000, 4.2e10, 0, 8), 0);  // unavailable: 0, as metrics.jsonl records it
}

}  // namespace
}  // namespace ft::plan

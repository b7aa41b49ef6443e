// The H200 roofline (plan/roofline.h) on cases worked out by hand, and `fluxtrain plan
// --step-trace` end to end on configs/tiny.toml.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "plan/roofline.h"

namespace ft::plan {
namespace {

OpRecord gemm(int64_t M, int64_t N, int64_t K) {
  OpRecord r;
  r.op = "matmul_bf16";
  r.kind = OpKind::kGemm;
  r.gemm = GemmShape{.M = M, .N = N, .K = K, .precision = Precision::kBF16};
  r.flops = 2.0 * M * N * K;
  r.bytes_read = 2.0 * (M * K + K * N);
  r.bytes_written = 4.0 * M * N;
  return r;
}

TEST(Roofline, H200Figures) {
  const Roofline r = h200_roofline();
  EXPECT_DOUBLE_EQ(r.peak_bf16, 989.4e12);
  EXPECT_DOUBLE_EQ(r.peak_fp32, 67e12);
  EXPECT_DOUBLE_EQ(r.hbm, 4.0e12);
  EXPECT_DOUBLE_EQ(r.gemm_cap, 790e12);
  EXPECT_DOUBLE_EQ(r.launch_s, 3e-6);
}

TEST(Roofline, LargeSquareGemmAtTheCap) {
  const Roofline r = h200_roofline();
  EXPECT_DOUBLE_EQ(gemm_efficiency(8192, 8192, 8192, r), 1.0);
  // 2 · 8192³ FLOPs at 790 TFLOP/s (1.392 ms; its 268 MB take 67 µs at 4 TB/s) + one launch.
  EXPECT_NEAR(price_op(gemm(8192, 8192, 8192), r), 2.0 * 8192.0 * 8192 * 8192 / 790e12 + 3e-6, 1e-12);
}

TEST(Roofline, ShapeEfficiencyByHand) {
  const Roofline r = h200_roofline();
  // 8192³: 32 × 64 = 2048 tiles of 128 × 256 in 16 waves of 132 (0.9697), K 8192/8448 (0.9697).
  const double ref = (2048.0 / (16 * 132)) * (8192.0 / 8448);
  // M = 16384, N = 2560, K = 2048 (the stage-3 qkv GEMM): 64 × 20 = 1280 tiles in 10 waves,
  // K 2048 / 2304.
  EXPECT_NEAR(gemm_efficiency(16384, 2560, 2048, r), (1280.0 / 1320) * (2048.0 / 2304) / ref, 1e-12);
  // A skinny one: 16 rows, 4096 × 4096: 16 tiles on 132 SMs (one wave), K 4096 / 4352.
  const double skinny = (16.0 / 132) * (4096.0 / 4352) / ref;
  EXPECT_NEAR(gemm_efficiency(16, 4096, 4096, r), skinny, 1e-12);
  EXPECT_LT(skinny, 0.15);
  // ... and memory-bound: its 33.7 MB at 4 TB/s (8.4 µs) beat 2 · 16 · 4096² FLOPs at
  // 790 · 0.128 TFLOP/s (5.3 µs).
  const OpRecord g = gemm(16, 4096, 4096);
  EXPECT_NEAR(price_op(g, r), (2.0 * (16 * 4096 + 4096 * 4096) + 4.0 * 16 * 4096) / 4e12 + 3e-6, 1e-12);
}

TEST(Roofline, MemoryBoundOpByHand) {
  const Roofline r = h200_roofline();
  OpRecord add;  // add_inplace of 2^28 floats: 8 bytes read, 4 written each → 3.22 GB
  add.op = "add_inplace";
  add.bytes_read = 8.0 * (1 << 28);
  add.bytes_written = 4.0 * (1 << 28);
  add.flops = 1 << 28;
  EXPECT_NEAR(price_op(add, r), 12.0 * (1 << 28) / 4e12 + 3e-6, 1e-12);  // 0.805 ms + a launch
  // Helper kernels and more launches add up.
  add.kernels = 3;
  add.side_bytes = 4e9;
  add.side_kernels = 2;
  EXPECT_NEAR(price_op(add, r), 12.0 * (1 << 28) / 4e12 + 1e-3 + 5 * 3e-6, 1e-12);
}

TEST(Roofline, AttentionRates) {
  const Roofline r = h200_roofline();
  // cuDNN SDPA, published (FlashAttention-3 paper, H100 SXM5, BF16): head dim 64 at 2k tokens.
  EXPECT_DOUBLE_EQ(sdpa_rate(64, 2048, false), 395e12);
  EXPECT_DOUBLE_EQ(sdpa_rate(128, 2048, true), 465e12);
  EXPECT_NEAR(sdpa_rate(64, 2896, false), 401.5e12, 0.01e12);  // halfway (in log2 T) to 4k's 408
  EXPECT_DOUBLE_EQ(sdpa_rate(64, 100000, false), 413e12);      // flat past 16k
  // The fp32 flash kernel: 10% of the 67 TFLOP/s fp32 peak.
  OpRecord a;
  a.op = "attention_forward";
  a.kind = OpKind::kFlashFp32;
  a.flops = 6.7e12;
  EXPECT_NEAR(price_op(a, r), 1.0 + 3e-6, 1e-9);
  a.kind = OpKind::kSdpa;
  a.attention = AttentionShape{.B = 1, .T = 2048, .H = 1, .Hkv = 1, .D = 64};
  a.flops = 395e12 * 0.01;
  EXPECT_NEAR(price_op(a, r), 0.01 + 3e-6, 1e-12);
}

TEST(Roofline, StepPriceByOpAndMfu) {
  const Roofline r = h200_roofline();
  OpTrace t;
  t.ops = {gemm(8192, 8192, 8192), gemm(8192, 8192, 8192)};
  OpRecord fill;
  fill.op = "memset";
  fill.kind = OpKind::kFill;
  fill.bytes_written = 4e9;  // 1 ms + a launch
  t.ops.push_back(fill);
  t.model_flops = 4.0 * 8192.0 * 8192 * 8192;
  t.tokens = 1;
  const StepPrice p = price_step(t, r);
  const double g = 2.0 * 8192.0 * 8192 * 8192 / 790e12 + 3e-6;
  ASSERT_EQ(p.by_op.size(), 2u);
  EXPECT_EQ(p.by_op[0].name, "matmul_bf16");
  EXPECT_EQ(p.by_op[0].calls, 2);
  EXPECT_NEAR(p.seconds, 2 * g + 1e-3 + 3e-6, 1e-12);
  EXPECT_NEAR(p.non_gemm_share(), (1e-3 + 3e-6) / p.seconds, 1e-12);
  EXPECT_NEAR(p.mfu, t.model_flops / p.seconds / 989.4e12, 1e-12);
  EXPECT_EQ(p.gemms.size(), 1u);
  EXPECT_EQ(p.kernels, 3);
}

// The command on the tiny model: a few hundred ops, well under a second (bounded at 60 s).
TEST(Roofline, StepTraceCommand) {
  const std::string cmd = "timeout 60 " + std::string(FT_FLUXTRAIN_BIN) + " plan --step-trace " + FT_SOURCE_DIR +
                          "/configs/tiny.toml --set train.precision=\\\"bf16\\\" --json 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(cmd.c_str(), "r"), ::pclose);
  ASSERT_TRUE(pipe);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, pipe.get())) out.append(buf, n);
  const nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["gpu"], "h200");
  EXPECT_EQ(j["tokens"], 256);
  EXPECT_EQ(j["precision"], "bf16");
  EXPECT_GT(j["predicted_mfu"].get<double>(), 0);
  EXPECT_LT(j["predicted_mfu"].get<double>(), 1);
  // 51 GEMMs (tests/unit/dryrun_step_trace_test.cpp): 27 plain, 16 with a bf16 output, 8 adding
  // the residual in their epilogue.
  int64_t gemms = 0;
  for (const auto& g : j["by_op"])
    if (g["gemm"].get<bool>()) gemms += g["calls"].get<int64_t>();
  EXPECT_EQ(gemms, 51) << j["by_op"].dump();
  // More than one rank is refused with one line.
  const std::string bad = "timeout 60 " + std::string(FT_FLUXTRAIN_BIN) + " plan --step-trace " + FT_SOURCE_DIR +
                          "/configs/tiny.toml --set parallel.dp=2 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> p2(::popen(bad.c_str(), "r"), ::pclose);
  std::string err;
  while (size_t n = std::fread(buf, 1, sizeof buf, p2.get())) err.append(buf, n);
  EXPECT_NE(err.find("one GPU"), std::string::npos) << err;
}

}  // namespace
}  // namespace ft::plan

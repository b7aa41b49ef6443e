// The claim checker on the reference case study (7B LLaMA, 128 A100, 1.84 M tokens/s, 0.42 s
// per step of 1024 x 2048 tokens, 58% MFU, 5.6 days for 3 epochs of 4.2 T tokens) and on a
// set of claims that are consistent by construction.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "plan/research/claims.h"
#include "util/error.h"
#include "util/fs.h"

namespace ft::plan {
namespace {

nlohmann::json case_study() {
  return nlohmann::json::parse(read_file(std::string(FT_SOURCE_DIR) + "/configs/claims/case-study.json"));
}

bool has(const CheckResult& c, const std::string& kind, const std::string& text) {
  for (const auto& v : c.violations)
    if (v.kind == kind && v.message.find(text) != std::string::npos) return true;
  return false;
}

TEST(PlanCheck, CaseStudyIsFlaggedWithTheArithmetic) {
  CheckResult c = check_claims(case_study());
  std::printf("%s", format_check(c).c_str());
  EXPECT_FALSE(c.possible);
  // 1.84 M tokens/s / 128 = 14.4 k tokens/s per GPU x 42.9 GFLOP = 616 TFLOP/s > 312 TFLOP/s.
  EXPECT_TRUE(has(c, "impossible", "1.84 M tokens/s means 14.4 k tokens/s per GPU x 42.9 GFLOP = 616 TFLOP/s"));
  EXPECT_TRUE(has(c, "impossible", "197% of the 312 TFLOP/s peak"));
  // 1024 x 2048 tokens / 0.42 s = 4.99 M tokens/s: impossible, and 2.71x the claimed rate.
  EXPECT_TRUE(has(c, "impossible", "2.1 M tokens per step / 0.42 s = 4.99 M tokens/s"));
  EXPECT_TRUE(has(c, "inconsistent", "differ by 2.71x"));
  // 58% MFU is 540 k tokens/s, 3.4x less than claimed.
  EXPECT_TRUE(has(c, "inconsistent", "58.0% x 128 x 312 TFLOP/s / 42.9 GFLOP = 540 k tokens/s"));
  // 3 x 4.2 T tokens in 5.6 days needs 26 M tokens/s.
  EXPECT_TRUE(has(c, "impossible", "12.6 T tokens / (5.6 days x 86400 s) = 26 M tokens/s"));
  nlohmann::json j = to_json(c);
  EXPECT_FALSE(j["possible"].get<bool>());
  EXPECT_GE(j["violations"].size(), 6u);
  EXPECT_TRUE(j["violations"][0].contains("message"));
}

TEST(PlanCheck, ConsistentClaimsPass) {
  nlohmann::json c = case_study();
  // 400 k tokens/s on 128 A100: 43% MFU, 5.24 s per step of 2.1 M tokens, 12.6 T tokens in 364.6
  // days.
  const double tps = 400e3, flops = 42.9e9;
  c["tokens_per_s_total"] = tps;
  c["step_time_s"] = 2097152 / tps;
  c["mfu"] = tps * flops / (128 * 312e12);
  c["wall_days"] = 12.6e12 / tps / 86400;
  c["gpu_hours"] = 12.6e12 / tps / 3600 * 128;
  CheckResult r = check_claims(c);
  EXPECT_TRUE(r.possible) << format_check(r);
  EXPECT_TRUE(r.violations.empty());
}

TEST(PlanCheck, MemoryThatFitsNowhere) {
  nlohmann::json c = case_study();
  c["layers"] = 80;
  c["hidden"] = 8192;
  c["heads"] = 64;
  c["kv_heads"] = 8;
  c["ffn_hidden"] = 28672;
  c["params_b"] = 69;
  c["num_gpus"] = 2;
  c["global_batch_seqs"] = 2;
  c["global_batch_tokens"] = 4096;
  c.erase("tokens_per_s_total");
  c.erase("step_time_s");
  c.erase("wall_days");
  CheckResult r = check_claims(c);
  EXPECT_FALSE(r.possible);
  EXPECT_TRUE(has(r, "impossible", "does not fit on 2 x a100-80gb")) << format_check(r);
}

TEST(PlanCheck, BadInput) {
  EXPECT_THROW(check_claims(nlohmann::json::array()), Error);
  nlohmann::json c = case_study();
  c["gpu_type"] = "TPU v9";
  try {
    check_claims(c);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not in the catalog"), std::string::npos);
    EXPECT_NE(e.hint().find("a100-80gb"), std::string::npos);
  }
}

}  // namespace
}  // namespace ft::plan

// Claim checker: given figures someone claims for a training run (tokens/s, step time, MFU,
// TFLOP/s, days, GPU-hours, cost, on N GPUs of a type), say which are impossible (above the
// GPUs' peak FLOP/s, a model that fits in no layout) and which contradict each other, showing
// the arithmetic. Claims use the published-run schema (configs/planner/published-runs-dev.json),
// plus optional "epochs", "dataset_tokens" and "price_per_gpu_hour".
//
//   CheckResult c =
//   check_claims(nlohmann::json::parse(read_file("configs/claims/case-study.json"))); c.possible;
//   for (auto& v : c.violations) puts(v.message.c_str());
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace ft::plan {

struct Violation {
  std::string kind;                 // "impossible" or "inconsistent"
  std::vector<std::string> claims;  // the record fields involved
  std::string message;              // one sentence with the arithmetic
};

struct CheckResult {
  bool possible = true;  // no violations: the claims can all be true at once
  std::vector<Violation> violations;
  std::vector<std::string> warnings;  // plausible but optimistic (above the planner's best layout)
  std::vector<std::string> facts;     // what the check derived (FLOPs per token, peak, ...)
};

CheckResult check_claims(const nlohmann::json& claims);
nlohmann::json to_json(const CheckResult& c);
std::string format_check(const CheckResult& c);

}  // namespace ft::plan

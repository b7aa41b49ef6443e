#include "obs/metrics_reader.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/log.h"

namespace ft::obs {
namespace {

double number_or_nan(const nlohmann::json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return NAN;  // null, absent, or "NaN" strings
  return it->get<double>();
}

}  // namespace

std::vector<MetricsRecord> read_metrics_jsonl(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw Error(fmt::format("cannot read {}", path),
                "is it a fluxtrain run directory? `fluxtrain train` writes metrics.jsonl there");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::map<int64_t, MetricsRecord> by_step;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      if (i + 1 == lines.size()) {
        log_warn("{}:{}: last line is incomplete (the run was interrupted mid-write?); skipped", path, i + 1);
        continue;
      }
      throw Error(fmt::format("{}:{}: not a JSON object: {:.80}", path, i + 1, line),
                  "metrics.jsonl holds one JSON object per line");
    }
    auto st = j.find("step");
    if (st == j.end() || !st->is_number_integer())
      throw Error(fmt::format("{}:{}: no integer \"step\" in {:.80}", path, i + 1, line),
                  "every metrics.jsonl line carries the step it describes");
    MetricsRecord r;
    r.step = st->get<int64_t>();
    r.loss = number_or_nan(j, "loss");
    r.lr = number_or_nan(j, "lr");
    r.grad_norm = number_or_nan(j, "grad_norm");
    r.tokens = number_or_nan(j, "tokens");
    r.tokens_per_s = number_or_nan(j, "tokens_per_s");
    r.step_s = number_or_nan(j, "step_s");
    r.mfu = number_or_nan(j, "mfu");
    r.data_wait_s = number_or_nan(j, "data_wait_s");
    r.val_loss = number_or_nan(j, "val_loss");
    r.val_bpc = number_or_nan(j, "val_bpc");
    r.goodput = number_or_nan(j, "goodput");
    r.straggler_cost_s = number_or_nan(j, "straggler_cost_s");
    r.productive_s = number_or_nan(j, "productive_s");
    if (auto sk = j.find("skipped"); sk != j.end() && sk->is_boolean()) r.skipped = sk->get<bool>() ? 1 : 0;
    for (auto& [k, v] : j.items())
      if (k.rfind("val_bpc_", 0) == 0 && v.is_number()) r.val_bpc_by_source[k.substr(8)] = v.get<double>();
    // A later line for the same step (a resumed run, or a separate evaluation line) overrides
    // the fields it carries.
    auto [it, fresh] = by_step.try_emplace(r.step, r);
    if (!fresh) {
      MetricsRecord& o = it->second;
      for (auto [dst, src] : {std::pair{&o.loss, r.loss},
                              {&o.lr, r.lr},
                              {&o.grad_norm, r.grad_norm},
                              {&o.tokens, r.tokens},
                              {&o.tokens_per_s, r.tokens_per_s},
                              {&o.step_s, r.step_s},
                              {&o.mfu, r.mfu},
                              {&o.data_wait_s, r.data_wait_s},
                              {&o.val_loss, r.val_loss},
                              {&o.val_bpc, r.val_bpc},
                              {&o.skipped, r.skipped},
                              {&o.goodput, r.goodput},
                              {&o.straggler_cost_s, r.straggler_cost_s},
                              {&o.productive_s, r.productive_s}})
        if (!std::isnan(src) || j.contains("loss")) *dst = src;
      for (auto& [k, v] : r.val_bpc_by_source) o.val_bpc_by_source[k] = v;
    }
  }
  std::vector<MetricsRecord> out;
  out.reserve(by_step.size());
  for (auto& [s, r] : by_step) out.push_back(r);
  return out;
}

}  // namespace ft::obs

#include "plan/research/calibrate.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "config/plan_job.h"
#include "plan/plan.h"
#include "plan/research/fit.h"
#include "plan/traffic.h"
#include "util/error.h"
#include "util/fs.h"

namespace ft::plan {

namespace {

using nlohmann::json;

// {"model": {"dim": 64, ...}, ...} -> {"model.dim=64", ...}
void flatten(const json& j, const std::string& prefix, std::vector<std::string>& out) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (it->is_object())
      flatten(*it, key, out);
    else if (it->is_string())
      out.push_back(key + "=" + it->get<std::string>());
    else
      out.push_back(key + "=" + it->dump());
  }
}

double median(std::vector<double> v) {
  return v.empty() ? 0.0 : percentile(std::move(v), 0.5);
}

}  // namespace

RunMeasurement read_run(const std::string& run_dir, const std::string& config_path,
                        const std::vector<std::string>& overrides) {
  namespace fs = std::filesystem;
  RunMeasurement m;
  m.dir = run_dir;
  const std::string metrics = (fs::path(run_dir) / "metrics.jsonl").string();
  if (!fs::exists(metrics))
    throw Error(fmt::format("{} does not exist", metrics), "pass the run directory of a `fluxtrain train` run");
  if (!config_path.empty()) {
    m.config = load_config(config_path, overrides);
  } else if (fs::exists(fs::path(run_dir) / "config.json")) {
    const std::string path = (fs::path(run_dir) / "config.json").string();
    json j;
    try {
      j = json::parse(read_file(path));
    } catch (const json::exception& e) {
      throw Error(fmt::format("{}: invalid JSON: {}", path, e.what()));
    }
    std::vector<std::string> sets;
    flatten(j, "", sets);
    sets.insert(sets.end(), overrides.begin(), overrides.end());
    m.config = load_config("", sets);
  } else if (fs::exists(fs::path(run_dir) / "config.toml")) {
    m.config = load_config((fs::path(run_dir) / "config.toml").string(), overrides);
  } else {
    throw Error(fmt::format("{}: no config.json or config.toml", run_dir),
                "pass the run's configuration with --config FILE");
  }

  std::ifstream in(metrics);
  std::vector<double> step_s, tps, mfu;
  int64_t line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j;
    try {
      j = json::parse(line);
    } catch (const json::exception& e) {
      throw Error(fmt::format("{}:{}: not a JSON object: {}", metrics, line_no, e.what()),
                  "metrics.jsonl holds one JSON object per line");
    }
    if (!j.is_object() || !j.contains("step_s") || !j["step_s"].is_number())
      throw Error(fmt::format("{}:{}: missing the number 'step_s'", metrics, line_no));
    ++m.steps;
    step_s.push_back(j["step_s"].get<double>());
    if (j.contains("tokens_per_s") && j["tokens_per_s"].is_number()) tps.push_back(j["tokens_per_s"].get<double>());
    if (j.contains("mfu") && j["mfu"].is_number()) mfu.push_back(j["mfu"].get<double>());
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& k = it.key();
      if (k.rfind("mem_", 0) != 0 || k.size() < 11 || k.substr(k.size() - 6) != "_bytes" || !it->is_number()) continue;
      const std::string cat = k.substr(4, k.size() - 10);
      m.mem[cat] = std::max(m.mem[cat], it->get<double>());
    }
  }
  if (m.steps == 0) throw Error(fmt::format("{} has no steps", metrics), "let the run train a few steps");
  // Steady state: skip the first steps (allocation, warm-up); keep at least one.
  const size_t skip = std::min(step_s.size() - 1, std::max<size_t>(2, step_s.size() / 10));
  m.step_s = median(std::vector<double>(step_s.begin() + static_cast<std::ptrdiff_t>(skip), step_s.end()));
  if (tps.size() > skip)
    m.tokens_per_s = median(std::vector<double>(tps.begin() + static_cast<std::ptrdiff_t>(skip), tps.end()));
  if (mfu.size() > skip)
    m.mfu = median(std::vector<double>(mfu.begin() + static_cast<std::ptrdiff_t>(skip), mfu.end()));
  return m;
}

Calibration calibrate(const std::vector<RunMeasurement>& runs, const GpuSpec& device) {
  FT_CHECK(!runs.empty(), "no runs");
  Calibration out;
  out.before = device.eff;
  struct Item {
    Job job;
    Layout layout;
    double measured;
  };
  std::vector<Item> items;
  for (const auto& r : runs) {
    Item it{job_for_run(r.config, device), layout_for_run(r.config), r.step_s};
    validate_layout(it.job, it.layout);
    items.push_back(it);
  }
  // x[0] scales the compute efficiencies (gemm, attention), x[1] the memory traffic.
  auto with = [&](const std::vector<double>& x) {
    Efficiency e = out.before;
    e.gemm = std::min(1.0, out.before.gemm * x[0]);
    e.attention = std::min(1.0, out.before.attention * x[0]);
    e.attention_hopper = std::min(1.0, out.before.attention_hopper * x[0]);
    e.memory_traffic = out.before.memory_traffic * x[1];
    return e;
  };
  auto predict_all = [&](const Efficiency& e, size_t i) {
    Job j = items[i].job;
    j.gpu.eff = e;
    return estimate_step_time(j, items[i].layout).total;
  };
  auto loss = [&](const std::vector<double>& x) {
    if (!(x[0] > 1e-4 && x[1] > 1e-4)) return 1e30;
    const Efficiency e = with(x);
    double s = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      const double d = std::log(predict_all(e, i) / items[i].measured);
      s += d * d;
    }
    return s;
  };
  std::vector<double> x = {1.0, 1.0};
  if (items.size() == 1) {
    // One equation: scale both by the same factor k (compute / k and memory x k), by bisection
    // on log k (the step time is monotone in k).
    double lo = -12, hi = 12;
    for (int i = 0; i < 200; ++i) {
      const double mid = 0.5 * (lo + hi), k = std::exp(mid);
      const double t = predict_all(with({1.0 / k, k}), 0);
      (t > items[0].measured ? hi : lo) = mid;
    }
    const double k = std::exp(0.5 * (lo + hi));
    x = {1.0 / k, k};
  } else {
    x = nelder_mead(loss, x, 400, 0.3);
  }
  out.fitted = with(x);
  for (size_t i = 0; i < items.size(); ++i) {
    RunCalibration rc;
    rc.dir = runs[i].dir;
    rc.measured_step_s = items[i].measured;
    rc.predicted_before_s = predict_all(out.before, i);
    rc.predicted_after_s = predict_all(out.fitted, i);
    const MemoryBreakdown mem = estimate_memory(items[i].job, items[i].layout);
    double planned_total = 0, measured_total = 0;
    for (auto& [cat, bytes] : mem.items()) {
      auto it = runs[i].mem.find(cat);
      const double measured = it == runs[i].mem.end() ? 0.0 : it->second;
      rc.memory[cat] = {bytes, measured};
      planned_total += bytes;
    }
    for (auto& [cat, bytes] : runs[i].mem)
      if (cat != "peak" && !rc.memory.count(cat)) rc.memory[cat] = {0.0, bytes};
    if (auto it = runs[i].mem.find("peak"); it != runs[i].mem.end())
      measured_total = it->second;
    else
      for (auto& [cat, pm] : rc.memory) measured_total += pm.second;
    rc.memory["total"] = {planned_total, measured_total};
    rc.memory_ratio = measured_total > 0 ? planned_total / measured_total : 0.0;
    out.runs.push_back(rc);
  }
  return out;
}

std::string format_calibration(const Calibration& c, const std::string& device) {
  std::string out = fmt::format("calibration of '{}'\n", device);
  out += fmt::format(
      "  efficiency      before   fitted\n  gemm            {:6.3f}   {:6.3f}\n"
      "  attention       {:6.3f}   {:6.3f}\n  memory_traffic  {:6.3f}   {:6.3f}\n",
      c.before.gemm, c.fitted.gemm, c.before.attention, c.fitted.attention, c.before.memory_traffic,
      c.fitted.memory_traffic);
  for (const auto& r : c.runs) {
    out += fmt::format("\n  run {}\n    step time: measured {:.4f} s, planned {:.4f} s before, {:.4f} s after\n", r.dir,
                       r.measured_step_s, r.predicted_before_s, r.predicted_after_s);
    out += "    memory (MiB)        planner   measured\n";
    for (auto& [cat, pm] : r.memory)
      out += fmt::format("    {:<18} {:9.2f}  {:9.2f}\n", cat, pm.first / 1048576.0, pm.second / 1048576.0);
    if (r.memory_ratio > 0) out += fmt::format("    planner / measured total: {:.3f}\n", r.memory_ratio);
  }
  return out;
}

nlohmann::json to_json(const Calibration& c) {
  auto eff = [](const Efficiency& e) {
    return json{{"gemm", e.gemm}, {"attention", e.attention}, {"memory_traffic", e.memory_traffic}};
  };
  json runs = json::array();
  for (const auto& r : c.runs) {
    json mem = json::object();
    for (auto& [cat, pm] : r.memory) mem[cat] = {{"planner_bytes", pm.first}, {"measured_bytes", pm.second}};
    runs.push_back({{"dir", r.dir},
                    {"measured_step_s", r.measured_step_s},
                    {"predicted_before_s", r.predicted_before_s},
                    {"predicted_after_s", r.predicted_after_s},
                    {"memory", mem},
                    {"memory_ratio", r.memory_ratio}});
  }
  return {{"before", eff(c.before)}, {"fitted", eff(c.fitted)}, {"runs", runs}};
}

std::string calibration_toml(const Calibration& c, const GpuSpec& device) {
  return fmt::format(
      "# written by `fluxtrain plan --calibrate`; use with `fluxtrain plan --gpu-file`\n"
      "[gpu]\nbase = \"{}\"\n\n[gpu.efficiency]\ngemm = {:.6g}\nattention = {:.6g}\n"
      "attention_hopper = {:.6g}\nmemory_traffic = {:.6g}\n",
      device.name, c.fitted.gemm, c.fitted.attention, c.fitted.attention_hopper, c.fitted.memory_traffic);
}

}  // namespace ft::plan

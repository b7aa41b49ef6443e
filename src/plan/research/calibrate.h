// Calibration from fluxtrain's own runs: reads RUN_DIR/metrics.jsonl (one JSON object per step:
// step, loss, lr, grad_norm, tokens, tokens_per_s, step_s, mfu and the allocator's
// mem_<category>_bytes / mem_peak_bytes) and the run's configuration, then fits the device's
// efficiency factors so the planner's step time matches the measured one, and compares the
// planner's memory with the allocator's accounting category by category.
//
//   RunMeasurement m = read_run(run_dir, /*config_override=*/"", {});
//   Calibration c = calibrate({m}, find_gpu("cpu"));
//   c.fitted.gemm;  c.runs[0].memory_ratio;   // planner / measured total bytes
#pragma once

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "plan/job.h"

namespace ft::plan {

struct RunMeasurement {
  std::string dir;
  Config config;                      // the run's resolved configuration
  int64_t steps = 0;                  // metrics lines read
  double step_s = 0;                  // median step time over the steady state
  double tokens_per_s = 0;            // median
  double mfu = 0;                     // median, as the trainer reports it
  std::map<std::string, double> mem;  // category -> bytes (max over steps); "peak" = mem_peak_bytes
};

// Reads RUN_DIR/metrics.jsonl and the configuration: `config_path` when given, else
// RUN_DIR/config.json (a `fluxtrain config` dump) or RUN_DIR/config.toml; `overrides` apply on
// top. Throws ft::Error naming the file and line of a malformed metrics line.
RunMeasurement read_run(const std::string& run_dir, const std::string& config_path,
                        const std::vector<std::string>& overrides);

struct RunCalibration {
  std::string dir;
  double measured_step_s = 0, predicted_before_s = 0, predicted_after_s = 0;
  std::map<std::string, std::pair<double, double>> memory;  // category -> (planner, measured) bytes
  double memory_ratio = 0;                                  // planner total / measured total
};

struct Calibration {
  Efficiency before, fitted;
  std::vector<RunCalibration> runs;
};

// One run: one scale on every compute efficiency; several runs: GEMM and memory-traffic
// efficiencies fitted separately (least squares on log step time).
Calibration calibrate(const std::vector<RunMeasurement>& runs, const GpuSpec& device);

std::string format_calibration(const Calibration& c, const std::string& device);
nlohmann::json to_json(const Calibration& c);
// The [gpu] TOML that `fluxtrain plan --gpu-file` reads back.
std::string calibration_toml(const Calibration& c, const GpuSpec& device);

}  // namespace ft::plan

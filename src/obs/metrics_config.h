// MetricsConfig (metrics.*): the Prometheus endpoint, GPU health sampling and TensorBoard logs.
//
//   [metrics]
//   enabled = true          # serve /metrics on every rank at port + local rank
//   port = 9450
//   gpu_temp_alert_c = 82
//
// Each rank serves its own endpoint (see docs/formats.md, "Metrics"): no rank waits for
// another to be scraped, and a dead rank is visible as a down target.
#pragma once

#include <cstdint>
#include <string>

namespace ft {

class ConfigBinder;

struct MetricsConfig {
  bool enabled = false;  // HTTP endpoint on /metrics (registry and logs run anyway)
  std::string bind_address = "0.0.0.0";
  int port = 9450;               // rank with local rank r listens on port + r; 0 = any free port
  bool port_fallback = false;    // port taken: use the next free one (logged) instead of failing
  int port_fallback_tries = 64;  // how many ports after the first to try when falling back
  double gpu_interval_s = 10;    // NVML sampling period; 0 = no GPU sampling
  double gpu_temp_alert_c = 82;  // above this a warning is logged and an alert gauge set
  bool tensorboard = true;       // rank 0 writes scalar event files to RUN_DIR/tb
  std::string run_name;          // value of the `run` label; empty = the run dir's name
  // Stragglers (obs/straggler.h): a rank computing more than straggler_factor x the median in
  // straggler_min_steps of the last straggler_window steps is named (rank 0, multi-rank runs).
  double straggler_factor = 1.25;
  int64_t straggler_window = 5;
  int64_t straggler_min_steps = 3;

  void bind(ConfigBinder& b);
  void validate() const;
};

}  // namespace ft

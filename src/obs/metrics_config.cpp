#include "obs/metrics_config.h"

#include "util/config_binder.h"
#include "util/error.h"

namespace ft {

void MetricsConfig::bind(ConfigBinder& b) {
  b.add("metrics.enabled", &enabled, "serve Prometheus metrics over HTTP on /metrics");
  b.add("metrics.bind_address", &bind_address, "address the /metrics endpoint listens on");
  b.add("metrics.port", &port, "first port; a rank listens on port + its local rank (0 = any free port)");
  b.add("metrics.port_fallback", &port_fallback, "when the port is taken, use the next free one instead of failing");
  b.add("metrics.port_fallback_tries", &port_fallback_tries, "ports tried after the first when falling back");
  b.add("metrics.gpu_interval_s", &gpu_interval_s, "seconds between NVML GPU samples (0 = off)");
  b.add("metrics.gpu_temp_alert_c", &gpu_temp_alert_c, "GPU temperature (Celsius) above which a warning is logged");
  b.add("metrics.tensorboard", &tensorboard, "write TensorBoard scalar event files to RUN_DIR/tb (rank 0)");
  b.add("metrics.run_name", &run_name, "value of the `run` label on every series (empty = run dir name)");
  b.add("metrics.straggler_factor", &straggler_factor,
        "a rank whose compute time exceeds this multiple of the ranks' median is slow in that step");
  b.add("metrics.straggler_window", &straggler_window, "steps over which slow steps are counted");
  b.add("metrics.straggler_min_steps", &straggler_min_steps,
        "slow steps within metrics.straggler_window that make a rank a straggler (logged, metrics.jsonl, "
        "fluxtrain_straggler_slowdown)");
}

void MetricsConfig::validate() const {
  if (port < 0 || port > 65535)
    throw Error(fmt::format("metrics.port = {} must be in [0, 65535]", port), "0 picks any free port");
  if (port_fallback_tries < 0 || port_fallback_tries > 65535)
    throw Error(fmt::format("metrics.port_fallback_tries = {} must be in [0, 65535]", port_fallback_tries));
  if (bind_address.empty())
    throw Error("metrics.bind_address is empty", "use \"0.0.0.0\" (all interfaces) or \"127.0.0.1\"");
  if (!(gpu_interval_s >= 0))
    throw Error(fmt::format("metrics.gpu_interval_s = {} must be >= 0", gpu_interval_s), "0 turns GPU sampling off");
  if (!(gpu_temp_alert_c > 0 && gpu_temp_alert_c < 200))
    throw Error(fmt::format("metrics.gpu_temp_alert_c = {} must be in (0, 200) degrees Celsius", gpu_temp_alert_c));
  if (!(straggler_factor > 1))
    throw Error(fmt::format("metrics.straggler_factor = {} must be > 1", straggler_factor),
                "e.g. 1.25: a rank 25% slower than the median is slow");
  if (straggler_window < 1 || straggler_window > 1000)
    throw Error(fmt::format("metrics.straggler_window = {} must be in [1, 1000]", straggler_window));
  if (straggler_min_steps < 1 || straggler_min_steps > straggler_window)
    throw Error(fmt::format("metrics.straggler_min_steps = {} must be in [1, metrics.straggler_window = {}]",
                            straggler_min_steps, straggler_window));
  for (char c : run_name)
    if (c == '\n' || c == '\0')
      throw Error("metrics.run_name contains a newline or NUL", "use a short name such as \"llama7b-pretrain\"");
}

}  // namespace ft

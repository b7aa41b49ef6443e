#include "plan/goodput.h"

#include "util/error.h"

namespace ft::plan {

Goodput expected_goodput(int64_t gpus, const Resilience& r) {
  if (!(r.failures_per_gpu_day >= 0))
    throw Error(fmt::format("failures per GPU-day = {} must be 0 or more", r.failures_per_gpu_day),
                fmt::format("Llama 3's 16k-GPU run saw {:.2e}", kFailuresPerGpuDay));
  if (!(r.restart_s >= 0)) throw Error(fmt::format("restart time = {} s must be 0 or more", r.restart_s));
  if (!(r.ckpt_interval_s > 0))
    throw Error(fmt::format("checkpoint interval = {} s must be positive", r.ckpt_interval_s),
                "e.g. --ckpt-interval-min 60");
  Goodput g;
  g.interruptions_per_day = static_cast<double>(gpus) * r.failures_per_gpu_day;
  g.lost_s_per_interruption = r.restart_s + 0.5 * r.ckpt_interval_s;
  // Per day of training, interruptions_per_day × lost seconds more of wall-clock.
  g.goodput = 1.0 / (1.0 + g.interruptions_per_day * g.lost_s_per_interruption / 86400.0);
  return g;
}

}  // namespace ft::plan

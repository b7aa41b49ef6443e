// Goodput: the share of wall-clock a run trains, given failures. Interruptions arrive at
// GPUs × a per-GPU failure rate; each costs a restart plus the work since the last checkpoint
// (half an interval on average). The rate's default is Llama 3's (Dubey et al. 2024, "The Llama 3
// Herd of Models", Sec. 3.3.4): 419 unexpected interruptions in a 54-day snapshot on 16,384 H100s.
//
//   Goodput g = expected_goodput(16384, Resilience{});   // g.interruptions_per_day = 7.76
//   wall_with_failures = wall / g.goodput;
#pragma once

#include <cstdint>

namespace ft::plan {

inline constexpr double kFailuresPerGpuDay = 419.0 / (54.0 * 16384.0);

struct Resilience {
  double failures_per_gpu_day = kFailuresPerGpuDay;
  double restart_s = 600;         // detect, reschedule, reload: an assumption, set it per cluster
  double ckpt_interval_s = 3600;  // time between checkpoints
};

struct Goodput {
  double interruptions_per_day = 0;
  double lost_s_per_interruption = 0;  // restart + half a checkpoint interval
  double goodput = 1;                  // training time / wall-clock
};

// Throws ft::Error naming the value when a rate or time is negative or the interval is zero.
Goodput expected_goodput(int64_t gpus, const Resilience& r);

}  // namespace ft::plan

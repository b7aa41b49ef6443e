// One planned layout: its memory, its step time and what follows from them (throughput, MFU,
// wall-clock, GPU-hours, cost).
//
//   PlanResult r = evaluate(job, layout);          // validate_layout() first
//   r.tokens_per_s;  r.mfu;  r.wall_seconds;  r.cost_usd;  r.memory.fits();
//   r.checkpoints.optimal_interval_s;   // with job.tokens: failures and checkpoints over the run
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "plan/job.h"
#include "plan/memory_estimate.h"
#include "plan/time.h"

namespace ft::plan {

struct PlanResult {
  Layout layout;
  int64_t gpus = 0;
  MemoryBreakdown memory;
  StepTime time;
  double tokens_per_step = 0;
  double tokens_per_s = 0;
  double tokens_per_s_per_gpu = 0;
  double model_flops_per_token = 0;       // ModelConfig::train_flops_per_token (6N + attention)
  double hardware_flops_per_token = 0;    // plus recompute
  double tflops_per_gpu = 0;              // model FLOPs per second per GPU / 1e12
  double mfu = 0;                         // model FLOP/s over the dense peak of the precision
  double hfu = 0;                         // hardware FLOP/s over the same peak
  double steps = 0;                       // optimizer steps for job.tokens
  double wall_seconds = 0;                // steps × step time, without failures
  Goodput goodput;                        // interruptions per day and what they cost
  CheckpointPlan checkpoints;             // save time, Young/Daly's interval, the run's losses
  double wall_seconds_with_failures = 0;  // wall_seconds / goodput
  double gpu_hours = 0;
  double cost_usd = 0;
  double price_per_gpu_hour = 0;  // the job's, for the cost of failures and saves
};

PlanResult evaluate(const Job& job, const Layout& l);

nlohmann::json to_json(const Job& job);
nlohmann::json to_json(const PlanResult& r);

}  // namespace ft::plan

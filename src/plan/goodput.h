// Goodput: the share of wall-clock a run trains, given failures and checkpoints. Interruptions
// arrive at GPUs × a per-GPU failure rate; each costs a restart plus the work since the last
// checkpoint (half an interval on average); every checkpoint costs its save time. The rate's
// default is Llama 3's (Dubey et al. 2024, "The Llama 3 Herd of Models", Sec. 3.3.4): 419
// unexpected interruptions in a 54-day snapshot on 16,384 H100s.
//
//   Goodput g = expected_goodput(16384, Resilience{});   // g.interruptions_per_day = 7.76
//   wall_with_failures = wall / g.goodput;
//   CheckpointPlan c = plan_checkpoints(job_params, nodes, gpus, step_s, train_s, Resilience{});
//   c.optimal_interval_s;   // Young/Daly: sqrt(2 · save time · MTBF)
#pragma once

#include <cstdint>

namespace ft::plan {

inline constexpr double kFailuresPerGpuDay = 419.0 / (54.0 * 16384.0);
// This trainer's checkpoint: fp32 weights and AdamW's m and v, 12 bytes per parameter
// (docs/formats.md, "Checkpoint": export_state copies exactly those).
inline constexpr double kCheckpointBytesPerParam = 12.0;
// Write bandwidth of the checkpoint storage per node when none is given: an assumption (a
// modest parallel file system; one DGX node's storage NICs carry several times more).
inline constexpr double kStorageWriteBwPerNode = 2e9;

struct Resilience {
  double failures_per_gpu_day = kFailuresPerGpuDay;
  double restart_s = 600;         // detect, reschedule, reload: an assumption, set it per cluster
  double ckpt_interval_s = 3600;  // time between checkpoints
  int64_t ckpt_every_steps = 0;   // > 0: the interval is this many steps (overrides ckpt_interval_s)
  double save_s = 0;              // measured seconds one save costs the run; 0 = predicted
  double storage_write_bw_per_node = kStorageWriteBwPerNode;  // bytes/s, for the predicted save
};

struct Goodput {
  double interruptions_per_day = 0;
  double lost_s_per_interruption = 0;  // restart + half a checkpoint interval
  double save_s = 0;                   // what each checkpoint costs (0: not counted)
  double goodput = 1;                  // training time / wall-clock
};

// Throws ft::Error naming the value when a rate or time is negative or the interval is zero.
// Per second of training the run loses save_s / interval to saves and interruptions per second x
// (restart + interval / 2) to failures: goodput = 1 / (1 + both).
Goodput expected_goodput(int64_t gpus, const Resilience& r, double save_s = 0);

// What failures and checkpoints cost a whole run at one checkpoint interval.
struct RunLoss {
  double interval_s = 0;
  Goodput goodput;
  double interruptions = 0;    // expected over the run (per day × days with failures)
  double failure_s = 0;        // interruptions × (restart + interval / 2)
  double saves = 0;            // checkpoints written over the run
  double save_overhead_s = 0;  // saves × save time
  double wall_s = 0;           // training + failures + saves
};

// Checkpoints over a run: bytes, save time (measured or bytes / storage), the interval chosen
// (minutes or steps), the job's MTBF and Young/Daly's optimal interval, and the run's losses at
// the chosen and at the optimal interval.
struct CheckpointPlan {
  double bytes = 0;       // one checkpoint (kCheckpointBytesPerParam × parameters)
  double storage_bw = 0;  // aggregate write bandwidth: per node × nodes
  double save_s = 0;      // measured (Resilience::save_s), else bytes / storage_bw
  bool save_measured = false;
  double interval_s = 0;          // the chosen interval
  double interval_steps = 0;      // the chosen interval in optimizer steps
  double mtbf_s = 0;              // 86400 / interruptions per day (infinite without failures)
  double optimal_interval_s = 0;  // sqrt(2 · save_s · mtbf_s); 0 when there are no failures
  RunLoss at_chosen, at_optimal;
};

// params: the model's trainable parameters; step_s: one optimizer step; train_s: the run without
// failures (0: per-day figures only). Throws ft::Error naming a bad value.
CheckpointPlan plan_checkpoints(double params, int64_t nodes, int64_t gpus, double step_s, double train_s,
                                const Resilience& r);

}  // namespace ft::plan

#include "plan/goodput.h"

#include <cmath>
#include <limits>

#include "util/error.h"

namespace ft::plan {

Goodput expected_goodput(int64_t gpus, const Resilience& r, double save_s) {
  if (!(r.failures_per_gpu_day >= 0))
    throw Error(fmt::format("failures per GPU-day = {} must be 0 or more", r.failures_per_gpu_day),
                fmt::format("Llama 3's 16k-GPU run saw {:.2e}", kFailuresPerGpuDay));
  if (!(r.restart_s >= 0)) throw Error(fmt::format("restart time = {} s must be 0 or more", r.restart_s));
  if (!(r.ckpt_interval_s > 0) || !std::isfinite(r.ckpt_interval_s))
    throw Error(fmt::format("checkpoint interval = {} s must be positive", r.ckpt_interval_s),
                "e.g. --ckpt-interval-min 60 or --ckpt-every-steps 2000");
  if (!(save_s >= 0)) throw Error(fmt::format("checkpoint save time = {} s must be 0 or more", save_s));
  Goodput g;
  g.interruptions_per_day = static_cast<double>(gpus) * r.failures_per_gpu_day;
  g.lost_s_per_interruption = r.restart_s + 0.5 * r.ckpt_interval_s;
  g.save_s = save_s;
  // Per second of training: interruptions_per_day / 86400 × lost seconds, and a save per interval.
  g.goodput = 1.0 / (1.0 + g.interruptions_per_day * g.lost_s_per_interruption / 86400.0 + save_s / r.ckpt_interval_s);
  return g;
}

namespace {

// Failures and saves over train_s seconds of training at one interval (first order: interruptions
// during restarts and saves are not counted, as in Young's derivation).
RunLoss run_loss(int64_t gpus, Resilience r, double interval_s, double save_s, double train_s) {
  r.ckpt_interval_s = interval_s;
  RunLoss l;
  l.interval_s = interval_s;
  l.goodput = expected_goodput(gpus, r, save_s);
  l.interruptions = l.goodput.interruptions_per_day * train_s / 86400.0;
  l.failure_s = l.interruptions * l.goodput.lost_s_per_interruption;
  l.saves = train_s / interval_s;
  l.save_overhead_s = l.saves * save_s;
  l.wall_s = train_s + l.failure_s + l.save_overhead_s;
  return l;
}

}  // namespace

CheckpointPlan plan_checkpoints(double params, int64_t nodes, int64_t gpus, double step_s, double train_s,
                                const Resilience& r) {
  if (!(r.storage_write_bw_per_node > 0) || !std::isfinite(r.storage_write_bw_per_node))
    throw Error(
        fmt::format("storage write bandwidth = {} GB/s per node must be positive", r.storage_write_bw_per_node / 1e9),
        "e.g. --storage-gbs 2 (what one node writes to the checkpoint storage, GB/s)");
  if (!(r.save_s >= 0) || !std::isfinite(r.save_s))
    throw Error(fmt::format("checkpoint save time = {} s must be 0 or more", r.save_s),
                "e.g. --ckpt-save-s 12 (checkpoints.jsonl's sync_s, or stall_s for asynchronous saves)");
  if (r.ckpt_every_steps < 0)
    throw Error(fmt::format("checkpoint every {} steps: must be positive", r.ckpt_every_steps),
                "e.g. --ckpt-every-steps 2000");
  CheckpointPlan c;
  c.bytes = kCheckpointBytesPerParam * params;
  c.storage_bw = r.storage_write_bw_per_node * static_cast<double>(nodes);
  c.save_measured = r.save_s > 0;
  c.save_s = c.save_measured ? r.save_s : c.bytes / c.storage_bw;
  c.interval_s = r.ckpt_every_steps > 0 ? static_cast<double>(r.ckpt_every_steps) * step_s : r.ckpt_interval_s;
  c.interval_steps = r.ckpt_every_steps > 0 ? static_cast<double>(r.ckpt_every_steps) : c.interval_s / step_s;
  c.at_chosen = run_loss(gpus, r, c.interval_s, c.save_s, train_s);
  const double per_day = c.at_chosen.goodput.interruptions_per_day;
  c.mtbf_s = per_day > 0 ? 86400.0 / per_day : std::numeric_limits<double>::infinity();
  if (per_day > 0 && c.save_s > 0) {
    // Young (1974): the interval minimising save_s / τ + (τ / 2) / MTBF per second of training.
    c.optimal_interval_s = std::sqrt(2.0 * c.save_s * c.mtbf_s);
    c.at_optimal = run_loss(gpus, r, c.optimal_interval_s, c.save_s, train_s);
  }
  return c;
}

}  // namespace ft::plan

// StepGuard: decides, after the gradients of a step are reduced, whether the update happens.
// A non-finite loss or gradient norm skips it (fault.nan_policy = "skip") or stops the run
// ("stop"); a spike — the loss or the gradient norm more than fault.spike_zscore standard
// deviations above the mean of the last fault.spike_window accepted steps (and at least 10 %
// above that mean for the loss, 5× it for the gradient norm) — skips it;
// fault.spike_rollback_after spikes within the window ask for a rollback to the last checkpoint.
// Too many skipped updates in a row stop the run.
//
// The guard is a pure function of the (loss, grad norm) sequence it is fed; the trainer feeds
// every rank rank 0's all-reduced values (TrainingFaults::judge broadcasts them), so all ranks
// reach the same verdict and no rounding difference can split them.
//
//   StepGuard guard(cfg.fault);
//   GuardVerdict v = guard.judge(step, loss, grad_norm);
//   if (v.action == GuardAction::kUpdate) optimizer_step(...);
//   if (v.action == GuardAction::kRollback) { load checkpoint c; guard.rolled_back(c); }
//
// Its state (the window's accepted steps, the spikes in it, the run of skipped updates) is saved
// in every checkpoint (manifest "step_guard", docs/formats.md) and restored on resume, so a
// resumed run judges the steps after it exactly as an uninterrupted run does:
//
//   manifest.step_guard = guard.to_json();  ...  guard.restore(manifest.step_guard, "step_00000300/manifest.json");
#pragma once

#include <cstdint>
#include <deque>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "fault/fault_config.h"

namespace ft {

enum class GuardAction : uint8_t { kUpdate = 0, kSkip = 1, kRollback = 2, kStop = 3 };
const char* guard_action_name(GuardAction a);

struct GuardVerdict {
  GuardAction action = GuardAction::kUpdate;
  std::string reason;                  // "nan_loss", "inf_loss", "nan_grad_norm", "inf_grad_norm", "loss_spike",
                                       // "grad_norm_spike"
  double loss_z = 0, grad_norm_z = 0;  // z-scores against the window (0 when not judged)
  int64_t spikes_in_window = 0;        // spikes counted in the window, this one included
  std::string message;                 // kStop: the error message (names the step); otherwise a log line
  bool skipped() const { return action != GuardAction::kUpdate; }
};

class StepGuard {
 public:
  explicit StepGuard(const FaultConfig& cfg) : cfg_(cfg) {}

  // step: the 1-based number of the step being judged.
  GuardVerdict judge(int64_t step, double loss, double grad_norm);
  // After a rollback to checkpoint step `to_step`: forget history and spikes after it.
  void rolled_back(int64_t to_step);

  int64_t consecutive_skips() const { return consecutive_; }
  size_t history_size() const { return history_.size(); }
  size_t spikes_in_window() const { return spikes_.size(); }

  // {"history": [[step, loss, grad_norm], ...], "spikes": [step, ...], "consecutive_skips": n,
  //  "first_skip": step, "first_reason": "..."}; doubles round-trip exactly through JSON.
  nlohmann::json to_json() const;
  // The state to_json wrote. Throws ft::Error naming `where` and the field for anything malformed;
  // the guard is unchanged then.
  void restore(const nlohmann::json& j, const std::string& where);

 private:
  struct Point {
    int64_t step;
    double loss, grad_norm;
  };
  GuardVerdict skip(int64_t step, GuardVerdict v);

  FaultConfig cfg_;
  std::deque<Point> history_;   // accepted steps, oldest first, at most spike_window
  std::deque<int64_t> spikes_;  // steps judged spikes, within the window
  int64_t consecutive_ = 0, first_skip_ = 0;
  std::string first_reason_;
};

}  // namespace ft

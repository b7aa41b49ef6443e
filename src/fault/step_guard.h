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
#pragma once

#include <cstdint>
#include <deque>
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

// FaultInjector: the one seam through which tests reach into production code. Corruption of
// chosen steps, read from FLUXTRAIN_FAULT_INJECT, so the fault-injection tests can make real runs
// produce a NaN or a loss spike; and slowdowns of checkpoint writing and of every training step
// (FaultInjector::delays()), so they can kill a rank in the middle of a save, or signal a run that
// cannot have finished whatever the machine's speed; and a stand-in for the memory limit
// (FaultInjector::memory_limit()), so the memory check can refuse a run where no cgroup can be
// made. (Kills and hangs are not simulated: the tests send real signals.) No other production code
// reads a test hook from the environment: code below fault/ (util/, ...) gets the value passed in.
//
//   FLUXTRAIN_FAULT_INJECT="nan@5"           the step-5 batch yields a NaN loss and NaN gradients
//   FLUXTRAIN_FAULT_INJECT="gradnan@7:1"     world rank 1's gradients of the step-7 batch are NaN
//   FLUXTRAIN_FAULT_INJECT="spike@30*20,spike@31*20"   loss and gradients × 20 on those batches
//   kinds: nan, inf (loss and gradients), gradnan, gradinf (gradients only: an fp16 overflow),
//          spike (× factor, default 20)
//
// "@k" names the batch that step k reads in the run's original data order (global samples
// [(k-1)·B, k·B)), not the step counter: a restart replays the same batch and meets the same
// fault, as with bad data; a rollback that skips the data window does not.
//
//   FaultInjector inj = FaultInjector::from_env();
//   InjectedFault f = inj.at(first_sample / batch_size + 1, world_rank);
//   loss_sum *= f.loss_factor;  grad_scale *= f.grad_factor;
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "util/memory_limit.h"

namespace ft {

// Test-only slowdowns, 0 = none:
//   FLUXTRAIN_CKPT_TEST_DELAY_MS       each chunk a rank file writes waits this long
//   FLUXTRAIN_CKPT_TEST_COPY_DELAY_MS  an async save's copy to staging waits this long
//   FLUXTRAIN_STEP_TEST_DELAY_MS       each training step ends with a wait this long: a lower bound
//                                      on a run's duration that holds on any machine
//   FLUXTRAIN_START_TEST_DELAY_MS      a run waits this long before its first step (after it says
//                                      so): a window to signal it in before step 1
//   FLUXTRAIN_EVAL_TEST_DELAY_MS       each validation batch ends with a wait this long (and the
//                                      validation says when it starts): a window to signal it in
struct InjectedDelays {
  int ckpt_write_ms = 0;
  int ckpt_copy_ms = 0;
  int step_ms = 0;
  int start_ms = 0;
  int eval_batch_ms = 0;
};

struct InjectedFault {
  double loss_factor = 1;
  float grad_factor = 1;
  bool any() const { return loss_factor != 1 || grad_factor != 1; }
};

class FaultInjector {
 public:
  FaultInjector() = default;
  // Throws ft::Error naming the bad item of `spec`.
  explicit FaultInjector(const std::string& spec);
  static FaultInjector from_env();  // FLUXTRAIN_FAULT_INJECT; empty = none
  static InjectedDelays delays();   // the FLUXTRAIN_*_TEST_*DELAY_MS slowdowns
  // FLUXTRAIN_TEST_MEMORY_LIMIT=BYTES: the memory this process may use as a test says (in place of
  // available_memory(); a warning says so); nullopt when unset.
  static std::optional<MemoryLimit> memory_limit();

  // The corruption of the batch of original step `batch_step` (1-based) on world rank `rank`.
  InjectedFault at(int64_t batch_step, int rank) const;
  bool empty() const { return items_.empty(); }

 private:
  enum class Kind : uint8_t { kNan, kInf, kGradNan, kGradInf, kSpike };
  struct Item {
    Kind kind;
    int64_t step;
    int rank;  // -1 = every rank
    double factor;
  };
  std::vector<Item> items_;
};

}  // namespace ft

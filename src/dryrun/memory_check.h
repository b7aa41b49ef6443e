// Memory checked before the run, not by the OOM killer: the per-rank total of the planner's
// accounting (plan::estimate_stage_memory for the "cpu" device — what `fluxtrain train --dry-run
// --gpu cpu` and `fluxtrain plan --gpu cpu` print), plus the checkpoint staging buffers when
// checkpoints are on, times the ranks on this machine, against the memory this process may use
// (util/memory_limit.h: the cgroup limit, MemAvailable). Too big: one error naming the estimate,
// the limit and the micro-batch / recompute / layout change that would fit.
//
// A CUDA run (train.device "cuda", or "auto" on a GPU): the device footprint (the same accounting
// less the staging) of the ranks that share a GPU against that GPU's free memory
// (DeviceRuntime::memory_info: cudaMemGetInfo), in one line naming the device ("cuda:0 (NVIDIA
// H200): the run needs X per rank, Y free of Z"); host RAM then against the pinned checkpoint
// staging buffers only.
//
//   check_memory_fits(cfg, /*local_ranks=*/nproc, FaultInjector::memory_limit());  // ft::Error; a no-op
//                                                      // with train.memory_check = false
#pragma once

#include <optional>
#include <string>

#include "config/config.h"
#include "util/memory_limit.h"

namespace ft {

struct MemoryNeed {
  double per_rank = 0;                                   // the largest rank's bytes
  double model_state = 0, activations = 0, staging = 0;  // its parts: weights + grads + AdamW, kept, checkpoint
  // On a GPU run: what lives on the device (the rest, the checkpoint staging, is pinned host memory).
  double device() const { return per_rank - staging; }
};

MemoryNeed memory_need(const Config& cfg);

// host_limit: the memory this process may use, when the caller knows better (a test's stand-in:
// FaultInjector::memory_limit()); nullopt: available_memory().
void check_memory_fits(const Config& cfg, int local_ranks, const std::optional<MemoryLimit>& host_limit);

}  // namespace ft

// The run directory (train.run_dir) belongs to one run: nothing in it is overwritten behind the
// user's back. Before a run writes there (rank 0 of `fluxtrain train`, or `fluxtrain launch` before
// its first attempt):
//   - a directory holding another program's config.json (a Hugging Face export, ...) is refused;
//   - a fresh start (no ckpt.resume) where a run already lives (its config.json, metrics.jsonl,
//     checkpoints, ...) is refused — unless `force`: then that run's files are moved aside to
//     <run_dir>/replaced-<UTC time>/ (and a ckpt.dir elsewhere to <ckpt.dir>.replaced-<time>);
//   - resuming (ckpt.resume set) appends, as it always did.
//
//   claim_run_dir(cfg, force, RunDirUser::kTrain);   // ft::Error naming the directory and the files
#pragma once

#include <string>
#include <vector>

#include "config/config.h"

namespace ft {

enum class RunDirUser {
  kTrain,       // fluxtrain train: the supervisor's own files (supervisor.jsonl, logs/, ...) are its launcher's
  kSupervisor,  // fluxtrain launch, before its first attempt: they count as an earlier run's
};

// Returns the files moved aside (empty: nothing was there).
std::vector<std::string> claim_run_dir(const Config& cfg, bool force, RunDirUser user);

// Whether dir/config.json is a fluxtrain run's config (sections model, train, ...).
bool is_run_config(const std::string& path);

}  // namespace ft

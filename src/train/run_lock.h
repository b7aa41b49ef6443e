// One run at a time in a run directory: two `fluxtrain train` (or `launch`) into the same
// directory interleaved their metrics.jsonl and checkpoints. The first takes RUN_DIR/run.lock
// (an flock, held until the process ends, so a crash never leaves a lock behind) and writes its
// host and pid into it; a second start is refused naming them.
//
//   lock_run_dir(cfg.train.run_dir);   // ft::Error: "... in use by another run (host h, pid 12)"
//
// The supervisor (`fluxtrain launch`) holds the lock for its job: it passes its holder line to
// the ranks in FLUXTRAIN_RUN_LOCK_HOLDER, and a rank whose directory is locked by that holder
// goes on.
#pragma once

#include <string>

namespace ft {

inline constexpr const char* kRunLockFile = "run.lock";
inline constexpr const char* kRunLockHolderEnv = "FLUXTRAIN_RUN_LOCK_HOLDER";

// Takes (or, under the supervisor holding it, shares) the lock of `dir`, creating the directory.
// Returns the holder line ("host pid") the lock carries. A lock file left by a process that is
// gone is taken over, with a note.
std::string lock_run_dir(const std::string& dir);

}  // namespace ft

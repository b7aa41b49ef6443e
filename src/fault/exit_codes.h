// Exit codes of `fluxtrain train` that the supervisor (`fluxtrain launch`) acts on; it exits with
// the same codes (docs/formats.md, "Exit codes").
//
//   0  training finished and, when checkpoints are on, its last step is checkpointed
//   2  an error a restart would repeat (bad config, non-finite loss under fault.nan_policy =
//      "stop", the last updates skipped for a non-finite loss, the final checkpoint not written,
//      ...): the supervisor stops with that error
//   3  a communication failure — a peer died or hangs (collective timeout naming the ranks that
//      never arrived or never finished it): the supervisor restarts from the newest valid checkpoint
//   4  stopped on request — SIGTERM, SIGUSR1, the first SIGINT, or train.stop_after_minutes — after
//      checkpointing the last step: `--resume auto` continues exactly; the supervisor does not
//      restart (it was stopped on purpose)
//   5  stopped on request, but the last step is not checkpointed (checkpoints off, the save
//      failed, fault.preempt_grace_s ran out, or the stop came before the first step): a resume
//      starts from an older checkpoint (or step 0)
//   6  the rank's GPU reported an uncorrectable ECC error, a fatal XID or a failed row remap
//      (obs/gpu_xid.h): the supervisor excludes the rank's host and restarts without it
//      (fault.elastic), or stops naming the host
//  130 a second SIGINT: exited at once
// Anything else (a rank killed by a signal, mpirun's own codes) also counts as a failure to
// restart from, within fault.max_restarts.
#pragma once

namespace ft {

inline constexpr int kExitError = 2;
inline constexpr int kExitCommFailure = 3;
inline constexpr int kExitStopped = 4;
inline constexpr int kExitStoppedUnsaved = 5;
inline constexpr int kExitGpuFault = 6;
inline constexpr int kExitInterrupted = 130;

}  // namespace ft

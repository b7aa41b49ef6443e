// FaultConfig (fault.*): how a run survives failures — the training guards in the step loop
// (non-finite values, loss spikes, rollback) and the supervisor's policy (`fluxtrain launch`:
// heartbeats, restarts, elastic shrinking) and the bound on a wait in a collective.
//
//   [fault]
//   collective_timeout_s = 300   # a rank waiting longer in a collective names the absent ranks and
//   exits nan_policy = "skip"          # a non-finite loss or gradient norm skips the update
//   ("stop": error) spike_zscore = 6.0           # loss / grad-norm z-score over the window that
//   counts as a spike spike_rollback_after = 3     # spikes within spike_window steps → roll back
//   to the last checkpoint max_restarts = 3             # supervisor: restarts before it gives up
//   elastic = false              # supervisor: drop a bad host and go on with fewer dp ranks
#pragma once

#include <cstdint>
#include <string>

namespace ft {

class ConfigBinder;

enum class NanPolicy : uint8_t { kSkip = 0, kStop = 1 };

struct FaultConfig {
  // Training guards (every rank, agreed over the world).
  NanPolicy nan_policy = NanPolicy::kSkip;
  int64_t max_consecutive_skips = 10;  // skipped updates in a row before the run stops with an error
  double spike_zscore = 6.0;           // z-score above the window's mean that is a spike; 0 = detector off
  int64_t spike_window = 100;          // steps of loss / grad-norm history the z-score is taken over
  int64_t spike_min_history = 20;      // accepted steps needed before the detector judges
  int64_t spike_rollback_after = 3;    // spikes within spike_window steps → rollback; 0 = never
  bool record_samples = false;         // <run_dir>/samples/rank-N.jsonl: global sample range per step

  // Hang detection: when > 0, replaces parallel.collective_timeout_s (the communicator's bound on
  // every wait, 300 s by default) — load_config applies it.
  double collective_timeout_s = 0;

  // Supervisor (fluxtrain launch).
  int64_t max_restarts = 3;          // restarts after failures before the supervisor gives up
  double heartbeat_timeout_s = 900;  // no step progress from a training rank for this long = hung
  double startup_timeout_s = 1800;   // from start (or restart) to every rank's first heartbeat
  double stop_grace_s = 10;          // SIGTERM → SIGKILL when stopping a failed job
  bool elastic = false;              // restart without a bad host, with fewer data-parallel ranks
  int64_t host_max_failures = 2;     // failures attributed to a host before it is marked bad
  double host_wait_s = 600;          // without elastic: how long to wait for an unreachable host's return
  double report_wait_s = 30;         // a rank's failure report: time it gives the supervisor to dump stacks
  std::string health_check;          // shell command run per host before each (re)start; FT_HOST is set
  // At a restart, leave out the hosts the latest sniff test named slow (obs.sniff_interval,
  // <run_dir>/sniff.json) as a host that failed is left out: needs elastic.
  bool exclude_slow_hosts = false;

  // Stopping on purpose (SIGTERM, SIGUSR1, the first SIGINT): a rank whose checkpoint is not
  // durable this long after the signal exits without it (exit code 5, fault/exit_codes.h); the
  // supervisor waits as long for its ranks. Keep it below the scheduler's kill (Kubernetes'
  // terminationGracePeriodSeconds, the lead time of Slurm's --signal).
  double preempt_grace_s = 60;

  void bind(ConfigBinder& b);
  void validate() const;
};

const char* nan_policy_name(NanPolicy p);

}  // namespace ft

#include "fault/fault_config.h"

#include "util/config_binder.h"
#include "util/error.h"

namespace ft {

const char* nan_policy_name(NanPolicy p) {
  return p == NanPolicy::kSkip ? "skip" : "stop";
}

void FaultConfig::bind(ConfigBinder& b) {
  b.add_enum("fault.nan_policy", &nan_policy, {{"skip", NanPolicy::kSkip}, {"stop", NanPolicy::kStop}},
             "a non-finite loss or gradient norm: skip the update (counted), or stop with an error "
             "naming the step");
  b.add("fault.max_consecutive_skips", &max_consecutive_skips,
        "skipped updates in a row after which the run stops with an error naming the first");
  b.add("fault.spike_zscore", &spike_zscore,
        "z-score of the loss or gradient norm over the window above which a step is a spike (0 = "
        "off)");
  b.add("fault.spike_window", &spike_window, "steps of loss and gradient-norm history for the spike z-score");
  b.add("fault.spike_min_history", &spike_min_history, "accepted steps of history before spikes are judged");
  b.add("fault.spike_rollback_after", &spike_rollback_after,
        "spikes within fault.spike_window steps that roll back to the last checkpoint (0 = never)");
  b.add("fault.record_samples", &record_samples,
        "write each rank's consumed global sample range per step to RUN_DIR/samples/rank-N.jsonl");
  b.add("fault.collective_timeout_s", &collective_timeout_s,
        "seconds a rank waits in a collective before it names the ranks holding it up and "
        "exits (code 3); "
        "0 = parallel.collective_timeout_s");
  b.add("fault.max_restarts", &max_restarts, "fluxtrain launch: restarts after failures before giving up");
  b.add("fault.heartbeat_timeout_s", &heartbeat_timeout_s,
        "fluxtrain launch: seconds without step progress after which a training job counts as hung");
  b.add("fault.startup_timeout_s", &startup_timeout_s,
        "fluxtrain launch: seconds from a (re)start until every rank must have reported");
  b.add("fault.stop_grace_s", &stop_grace_s, "fluxtrain launch: seconds between SIGTERM and SIGKILL when stopping");
  b.add("fault.elastic", &elastic,
        "fluxtrain launch: restart without a bad host, with fewer data-parallel ranks (resharded "
        "checkpoint)");
  b.add("fault.host_max_failures", &host_max_failures,
        "fluxtrain launch: failures attributed to one host before it is marked bad");
  b.add("fault.host_wait_s", &host_wait_s,
        "fluxtrain launch without fault.elastic: seconds to wait before a restart for a host that "
        "cannot be reached (ssh) to come back; then it gives up");
  b.add("fault.report_wait_s", &report_wait_s,
        "under fluxtrain launch: seconds a rank that hit a communication failure waits, after "
        "reporting it, for the supervisor to read every rank's stack and stop the job (0 = abort at "
        "once)");
  b.add("fault.health_check", &health_check,
        "fluxtrain launch: shell command run for each host before every (re)start (FT_HOST names "
        "it); "
        "non-zero exit marks the host bad");
  b.add("fault.exclude_slow_hosts", &exclude_slow_hosts,
        "fluxtrain launch with fault.elastic: at a restart, leave out the hosts the latest sniff test named slow "
        "(obs.sniff_interval)");
  b.add("fault.preempt_grace_s", &preempt_grace_s,
        "after SIGTERM / SIGUSR1 / the first SIGINT: seconds to finish the step, checkpoint and exit (code 4) "
        "before exiting without the checkpoint (code 5); keep it below the scheduler's kill");
}

void FaultConfig::validate() const {
  if (max_consecutive_skips < 1)
    throw Error(fmt::format("fault.max_consecutive_skips = {} must be >= 1", max_consecutive_skips));
  if (!(spike_zscore >= 0))
    throw Error(fmt::format("fault.spike_zscore = {} must be >= 0", spike_zscore), "0 turns the detector off");
  if (spike_window < 2) throw Error(fmt::format("fault.spike_window = {} must be >= 2", spike_window));
  if (spike_min_history < 2 || spike_min_history > spike_window)
    throw Error(fmt::format("fault.spike_min_history = {} must be in [2, fault.spike_window = {}]", spike_min_history,
                            spike_window));
  if (spike_rollback_after < 0)
    throw Error(fmt::format("fault.spike_rollback_after = {} must be >= 0", spike_rollback_after),
                "0 = never roll back");
  if (!(collective_timeout_s >= 0))
    throw Error(fmt::format("fault.collective_timeout_s = {} must be >= 0", collective_timeout_s),
                "0 = use parallel.collective_timeout_s");
  if (max_restarts < 0) throw Error(fmt::format("fault.max_restarts = {} must be >= 0", max_restarts));
  if (!(heartbeat_timeout_s > 0))
    throw Error(fmt::format("fault.heartbeat_timeout_s = {} must be positive", heartbeat_timeout_s));
  if (!(startup_timeout_s > 0))
    throw Error(fmt::format("fault.startup_timeout_s = {} must be positive", startup_timeout_s));
  if (!(stop_grace_s >= 0)) throw Error(fmt::format("fault.stop_grace_s = {} must be >= 0", stop_grace_s));
  if (!(preempt_grace_s > 0)) throw Error(fmt::format("fault.preempt_grace_s = {} must be positive", preempt_grace_s));
  if (!(host_wait_s >= 0))
    throw Error(fmt::format("fault.host_wait_s = {} must be >= 0", host_wait_s),
                "0 = do not wait for an unreachable host");
  if (!(report_wait_s >= 0)) throw Error(fmt::format("fault.report_wait_s = {} must be >= 0", report_wait_s));
  if (host_max_failures < 1) throw Error(fmt::format("fault.host_max_failures = {} must be >= 1", host_max_failures));
  if (exclude_slow_hosts && !elastic)
    throw Error("fault.exclude_slow_hosts = true needs fault.elastic = true (the job goes on without the host)",
                "set fault.elastic = true, or fault.exclude_slow_hosts = false");
}

}  // namespace ft

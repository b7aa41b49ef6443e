// Supervisor: `fluxtrain launch` — starts the ranks of a training job, watches them, and
// restarts the job from its newest valid checkpoint after a rank dies or hangs.
//
//   Supervisor sup({.config_path = "configs/tiny.toml", .sets = {"parallel.dp=2"}, .binary = exe});
//   return sup.run();   // 0: training finished; ft::Error: bad input, budget spent, nothing to
//   resume
//
// One attempt = one launcher process (mpirun on this machine or a host list; srun inside a Slurm
// allocation) running `fluxtrain train`. The supervisor sets FLUXTRAIN_HEARTBEAT_DIR, so every
// rank reports (fault/heartbeat.h); from those reports it writes <run_dir>/ranks.json (rank,
// host, pid) and judges the job:
//   - a rank process gone (local ranks: /proc) or the launcher exiting non-zero  → failure;
//   - no rank's step advancing for fault.heartbeat_timeout_s (or not every rank up within
//     fault.startup_timeout_s)                                                  → hang;
//   - exit code 2 (fault/exit_codes.h: an error a restart would repeat)          → stop, no
//   restart;
//   - a rank's GPU failed (heartbeat phase "gpu_fault", exit code 6)               → its host is
//     marked bad at once and the restart goes on without it (fault.elastic).
// On a failure it stops the job (SIGTERM, then SIGKILL after fault.stop_grace_s), checks that a
// valid checkpoint exists (every piece verified, as `fluxtrain ckpt verify` does) and starts the
// next attempt resuming from it (ckpt.resume = its directory); with fault.elastic a host with
// fault.host_max_failures failures (or a failed fault.health_check) is dropped and the job goes on
// with fewer data-parallel ranks. Every event goes to <run_dir>/supervisor.jsonl and the log; each
// recovery is timed from failure detection to the first completed training step of the next
// attempt. All of it is documented in docs/operations.md.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "launch/hosts.h"
#include "launch/rank_blame.h"
#include "obs/badput.h"

namespace ft {

struct LaunchOptions {
  std::string config_path;
  std::vector<std::string> sets;  // --set overrides for every attempt
  int nproc = 0;                  // 0 = the config's world size (parallel.dp × tp × pp)
  std::string hosts_file;         // "" = this machine (or the Slurm allocation)
  std::string binary;             // the fluxtrain executable the ranks run
  bool echo = true;               // copy the job's output to our stderr
  bool force = false;             // --force: move an earlier run in the run directory aside
};

struct RecoveryRecord {
  std::string failure;  // kind: rank_died, hang, comm_failure, exit, startup_timeout
  double seconds = 0;   // failure detected → first training step of the next attempt
};

class Supervisor {
 public:
  explicit Supervisor(LaunchOptions o);
  ~Supervisor();
  // The supervisor's stop handling (SIGINT, SIGTERM, SIGUSR1), installed as early as possible
  // (run() installs it too): a stop during start-up is taken once the first attempt runs.
  static void take_signals();
  int run();
  const std::vector<RecoveryRecord>& recoveries() const { return recoveries_; }

 private:
  struct Attempt;
  struct Failure;
  enum class Launcher { kMpirunLocal, kMpirunHosts, kSrun };

  // resume: the checkpoint directory to resume from ("" = as the config says).
  std::unique_ptr<Attempt> start_attempt(int64_t dp, const std::string& resume, const std::optional<Failure>& after);
  std::optional<Failure> watch(Attempt& a);  // nullopt: the job finished
  std::optional<Failure> classify_exit(Attempt& a, int code);
  // What the launcher's output says went wrong: the ranks a timed-out rank named, a host whose
  // daemon was lost or that ssh could not reach, a rank the launcher saw die ("exit": nothing).
  // `reports`: the ranks' own failure reports (heartbeat phase "failed"), read with the output.
  Failure diagnose(const Attempt& a, const std::vector<std::string>& reports = {}) const;
  // A rank reported a communication failure (fault/heartbeat.h): wait a moment for the others'
  // reports, diagnose, read every rank's stack. nullopt: nobody reported.
  std::optional<Failure> reported_failure(Attempt& a);
  // Every rank now: last heartbeat, host, coordinates, process state (launch/rank_blame.h).
  std::vector<RankSeen> seen(const Attempt& a) const;
  // Nobody named yet: the ranks that went silent (no failure report) while others reported, and
  // whose process is gone (rank_died) or stopped (hang), are the culprits. Needs f.seen.
  void blame_silent(Failure& f, const std::string& first_report) const;
  // A "hang" whose named ranks all died on a signal (the launcher's f.died) is a rank_died.
  static void died_not_hung(Failure& f);
  // A "hang" whose named ranks' processes are all gone (f.seen): waits up to fault.stop_grace_s for
  // the launcher to say they died on a signal (then rank_died).
  void await_death_report(Attempt& a, Failure& f);
  // Local rank r vanished and the launcher's output named nobody (f.kind "exit"): whom to blame.
  Failure vanished(Attempt& a, int r, Failure f);
  // A rank reported that its GPU failed (heartbeat phase "gpu_fault"): its host is to be excluded.
  std::optional<Failure> gpu_fault(const Attempt& a) const;
  // Every rank's stacks into <run_dir>/stacks/attempt-N/ (launch/stacks.h).
  void dump_stacks_of(const Attempt& a, const std::string& why);
  static Failure make_failure(std::string kind, std::vector<int> ranks, std::string detail, double detected_at,
                              int exit_code, bool restartable);
  int host_index(const std::string& name) const;              // -1: not one of ours
  int failed_host(const Attempt& a, const Failure& f) const;  // -1: unknown
  // The remote hosts in use that do not answer ssh now, with why (index -> reason).
  std::map<size_t, std::string> unreachable_hosts() const;
  // Before a restart every remote host in use must answer ssh: with fault.elastic an unreachable
  // one is marked bad, without it the supervisor waits for its return (fault.host_wait_s; an
  // ft::Error when it does not come back). False: interrupted by a signal while waiting.
  bool await_hosts(const std::map<size_t, std::string>& unreachable);
  void stop(Attempt& a);    // a failed job: kill it
  int preempt(Attempt& a);  // a signal to us: the ranks checkpoint and exit; our exit code
  void read_heartbeats(Attempt& a);
  void write_ranks_json(const Attempt& a);
  std::vector<std::string> launcher_argv(const Attempt& a, const std::vector<std::string>& train_argv,
                                         const std::vector<std::string>& env_names) const;
  void run_health_checks();
  // fault.exclude_slow_hosts: the hosts the attempt's latest sniff test named slow are marked bad
  // (launch/slow_hosts.h), unless that would leave too few slots for one replica.
  void exclude_sniffed_hosts(const Attempt& a);
  int host_of(const Attempt& a, int rank) const;
  int64_t choose_dp(int64_t current_dp) const;  // elastic: the dp that fits the good hosts
  // A resumed launch (ckpt.resume set): the attempts and badput of the launches before it in the
  // run directory (launch/earlier_launch.h), so attempts go on counting and badput covers the job.
  void continue_earlier_launch();
  void event(nlohmann::json e);

  LaunchOptions opt_;
  Config cfg_;
  Launcher launcher_ = Launcher::kMpirunLocal;
  std::vector<Host> hosts_;
  std::vector<bool> bad_;
  std::vector<std::string> bad_why_;  // why each bad host is bad, for the error that names it
  std::vector<int> host_failures_;
  std::string run_dir_, hb_dir_;
  std::vector<RecoveryRecord> recoveries_;
  int attempts_ = 0;
  double job_started_ = 0;  // Unix seconds: goodput counts from here (obs/badput.h)
  // The job's badput up to the failed attempt's last row, its steps after the checkpoint the next
  // attempt resumes from counted as lost work (obs/badput.h); passed as FLUXTRAIN_BADPUT_BEFORE.
  std::optional<obs::BadputTotals> badput_before_;
  // "goodput 0.83: 52.1 s of training in 62.8 s since the job began" from metrics.jsonl; also into
  // the event `e`.
  std::string goodput_summary(nlohmann::json& e) const;
};

}  // namespace ft

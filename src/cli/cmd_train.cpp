// fluxtrain train — trains a model from one TOML file, on one process or under mpirun.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "config/config.h"
#include "dryrun/dry_run.h"
#include "dryrun/memory_check.h"
#include "fault/exit_codes.h"
#include "fault/gpu_fault.h"
#include "fault/heartbeat.h"
#include "fault/inject.h"
#include "parallel/comm/comm.h"
#include "parallel/ranks.h"
#include "tensor/memory.h"
#include "train/run_dir.h"
#include "train/stop_request.h"
#include "train/trainer.h"
#include "util/all_ranks_error.h"
#include "util/local_rank.h"
#include "util/log.h"
#include "util/strings.h"

namespace {

// Ends the job after a communication failure (a peer died or hangs, or the transport failed): the
// error's line and hint in this rank's log, the supervisor told, every rank stopped with the exit
// code it restarts on. Reached from the training thread (a CommError) or from a communicator's
// watchdog thread (an operation nobody waits for on the host failed), whichever comes first; a
// second caller waits for the end the first brings.
[[noreturn]] void end_job_on_comm_failure(ft::Ranks& ranks, double report_wait_s, const ft::CommError& e) {
  static std::atomic<bool> ending{false};
  if (ending.exchange(true))
    for (;;) ::pause();
  ft::log_error("{}{}{}", e.what(), e.hint().empty() ? "" : "\nhint: ", e.hint());
  if (!ranks.multi_rank()) {  // from a watchdog thread: no exit() while the training thread runs
    std::fflush(nullptr);
    std::_Exit(ft::kExitCommFailure);
  }
  // Under the supervisor: report it and give the supervisor time to read every rank's stack.
  ft::report_failure_to_supervisor(ranks.mesh().world_rank(), e.what(), report_wait_s);
  ranks.abort(ft::kExitCommFailure);
}

// The handler of failures found off the training thread, for as long as the run's communicators live.
struct CommFailureHandlerScope {
  CommFailureHandlerScope(ft::Ranks& ranks, double report_wait_s) {
    ft::set_comm_failure_handler(
        [&ranks, report_wait_s](const ft::CommError& e) { end_job_on_comm_failure(ranks, report_wait_s, e); });
  }
  ~CommFailureHandlerScope() { ft::set_comm_failure_handler(nullptr); }
  CommFailureHandlerScope(const CommFailureHandlerScope&) = delete;
  CommFailureHandlerScope& operator=(const CommFailureHandlerScope&) = delete;
};

int run_train(int argc, char** argv) {
  CLI::App app{"Train a model: fluxtrain train --config FILE [--set key=value ...] [--nproc N]"};
  std::string config_path, run_dir, resume;
  std::vector<std::string> sets;
  int nproc = 0;
  app.add_option("--config", config_path, "TOML config file")->required();
  app.add_option("--set", sets, "override a config key, KEY=VALUE (repeatable)");
  app.add_option("--run-dir", run_dir, "run directory (train.run_dir)");
  app.add_option("--nproc", nproc, "start N ranks on this machine with mpirun")->check(ft::cli::at_least(1));
  app.add_option("--resume", resume,
                 "resume from a checkpoint: 'auto' (the newest valid one under ckpt.dir) or a path (ckpt.resume)");
  bool dry = false, json = false;
  int64_t world_size = 0;
  std::string gpu = "a100-80gb";
  app.add_flag("--dry-run", dry,
               "plan every rank in this one process (mesh, schedule, shard plans, memory, "
               "communication per step) without allocating the model or starting ranks");
  app.add_option("--world-size", world_size, "with --dry-run: the ranks to plan (default: parallel.dp × tp × pp)")
      ->check(ft::cli::at_least(1));
  app.add_option("--gpu", gpu,
                 "with --dry-run: the device whose memory accounting to use (fluxtrain plan's "
                 "catalog; 'cpu' = this machine's trainer)")
      ->capture_default_str();
  app.add_flag("--json", json, "with --dry-run: print JSON");
  bool force = false;
  app.add_flag("--force", force,
               "start over in a run directory that holds a run: its files are moved to RUN_DIR/replaced-<time>/");
  FT_PARSE(app, argc, argv);
  // A rank (or the one process) stops on SIGTERM / SIGUSR1 / the first SIGINT after checkpointing;
  // the handlers go in before anything slow. `--nproc` forwards the signals to mpirun instead.
  if (nproc == 0 && !dry) ft::StopRequest::install();
  if (nproc > 0 && !dry) ft::take_stop_signals_for_mpirun();  // a stop now reaches the ranks once they start
  if (!run_dir.empty()) sets.push_back("train.run_dir=\"" + run_dir + "\"");
  if (!resume.empty()) sets.push_back("ckpt.resume=\"" + resume + "\"");
  ft::Config cfg = ft::load_config(config_path, sets);  // errors show before any rank starts
  ft::StopRequest::set_grace(cfg.fault.preempt_grace_s);
  if (dry) {
    ft::DryRun d = ft::dry_run(cfg, world_size > 0 ? world_size : cfg.parallel.world_size(), ft::plan::find_gpu(gpu));
    if (json)
      fmt::print("{}\n", ft::dry_run_json(d).dump(2));
    else
      fmt::print("{}", ft::format_dry_run(d));
    return 0;
  }
  if (world_size > 0) throw ft::Error("--world-size is for --dry-run", "start ranks with --nproc N or mpirun");
  // Memory is checked before the run, not by the OOM killer: every rank on this machine, once (by
  // --nproc's parent, or by each machine's first rank — before MPI_Init, so before any allocates).
  if (nproc > 0)
    ft::check_memory_fits(cfg, nproc, ft::FaultInjector::memory_limit());
  else if (ft::local_rank_from_env() == 0)
    ft::check_memory_fits(cfg, ft::local_size_from_env(), ft::FaultInjector::memory_limit());

  if (nproc > 0) {
    std::vector<std::string> args = {"/proc/self/exe"};
    args[0] = std::filesystem::canonical("/proc/self/exe").string();
    for (int i = 0; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--nproc") {
        ++i;
        continue;
      }
      if (a.rfind("--nproc=", 0) == 0) continue;
      args.push_back(a);
    }
    return ft::exec_under_mpirun(nproc, args);
  }

  ft::Ranks ranks(cfg.parallel, cfg.train.run_dir);
  CommFailureHandlerScope on_comm_failure(ranks, cfg.fault.report_wait_s);
  ft::RunEnd end = ft::RunEnd::kFinished;
  try {
    // Nothing of an earlier run (or another program) in the run directory is overwritten.
    if (ranks.mesh().world_rank() == 0) ft::claim_run_dir(cfg, force, ft::RunDirUser::kTrain);
    ranks.mesh().world().barrier();
    try {
      ft::Trainer trainer(cfg, ranks.mesh());
      end = trainer.run();
    } catch (const ft::OutOfMemory& e) {  // what the run was expected to need, beside what it held
      const ft::MemoryNeed need = ft::memory_need(cfg);
      throw ft::Error(fmt::format("{}; the planner's estimate for this run: {} per rank (weights, gradients and "
                                  "optimizer state {}, activations {}, checkpoint staging {})",
                                  e.what(), ft::human_bytes(need.per_rank), ft::human_bytes(need.model_state),
                                  ft::human_bytes(need.activations), ft::human_bytes(need.staging)),
                      e.hint() + "; `fluxtrain train --dry-run` prints the run's memory per rank");
    }
  } catch (const std::bad_alloc&) {
    if (!ranks.multi_rank()) throw;
    ft::log_error(
        "out of memory (an allocation failed)\nhint: `fluxtrain train --dry-run --gpu cpu` shows a run's memory");
    ranks.abort(ft::kExitError);
  } catch (const ft::CommError& e) {
    // A communication failure (a peer died or hangs) is worth a restart; other errors are not.
    end_job_on_comm_failure(ranks, cfg.fault.report_wait_s, e);
  } catch (const ft::GpuFault& e) {
    // This rank's GPU failed: the supervisor is told (so it excludes the host) and the job ends.
    ft::log_error("{}\nhint: {}", e.what(), e.hint());
    ft::report_failure_to_supervisor(ranks.mesh().world_rank(), e.what(), cfg.fault.report_wait_s, "gpu_fault");
    if (!ranks.multi_rank()) return ft::kExitGpuFault;
    ranks.abort(ft::kExitGpuFault);
  } catch (const ft::AllRanksError& e) {
    if (!ranks.multi_rank()) throw;
    // Every rank is here: rank 0 says it once, all end normally.
    if (ranks.mesh().world_rank() == 0) ft::log_error("{}{}{}", e.what(), e.hint().empty() ? "" : "\nhint: ", e.hint());
    return ft::kExitError;
  } catch (const ft::Error& e) {
    if (!ranks.multi_rank()) throw;
    // One rank's error must not leave the others waiting: report and stop the whole job.
    ft::log_error("{}{}{}", e.what(), e.hint().empty() ? "" : "\nhint: ", e.hint());
    ranks.abort(ft::kExitError);
  }
  switch (end) {
    case ft::RunEnd::kStopped:
      return ft::kExitStopped;
    case ft::RunEnd::kStoppedUnsaved:
      return ft::kExitStoppedUnsaved;
    default:
      return 0;
  }
}

ft::cli::Register register_train("train", "train a model from a TOML config (--nproc N for N local ranks)", run_train);

}  // namespace

// fluxtrain launch — the supervisor: starts the ranks, watches them, restarts after failures
// (launch/supervisor.h, docs/operations.md).
#include <CLI/CLI.hpp>
#include <filesystem>

#include "cli/command.h"
#include "launch/supervisor.h"

namespace {

int run_launch(int argc, char** argv) {
  CLI::App app{
      "Run a training job under the supervisor: fluxtrain launch --config FILE [--nproc N] "
      "[--hosts FILE]"};
  ft::LaunchOptions o;
  std::string run_dir;
  app.add_option("--config", o.config_path, "TOML config file")->required();
  app.add_option("--set", o.sets, "override a config key, KEY=VALUE (repeatable)");
  app.add_option("--run-dir", run_dir, "run directory (train.run_dir)");
  app.add_option("--nproc", o.nproc, "ranks to start (default: parallel.dp × tp × pp)")->check(ft::cli::at_least(1));
  app.add_option("--hosts", o.hosts_file,
                 "hosts file: one 'NAME [slots=N]' per line (default: this machine, or "
                 "the Slurm allocation inside one)");
  std::string resume;
  app.add_option("--resume", resume,
                 "resume from a checkpoint: 'auto' (the newest valid one under ckpt.dir) or a path (ckpt.resume)");
  app.add_flag("--force", o.force,
               "start over in a run directory that holds a run: its files are moved to RUN_DIR/replaced-<time>/");
  bool quiet = false;
  app.add_flag("--quiet", quiet, "do not copy the job's output to the terminal (it is in RUN_DIR/logs/)");
  FT_PARSE(app, argc, argv);
  ft::Supervisor::take_signals();  // before the config is read: a stop during start-up is not lost
  if (!run_dir.empty()) o.sets.push_back("train.run_dir=\"" + run_dir + "\"");
  if (!resume.empty()) o.sets.push_back("ckpt.resume=\"" + resume + "\"");
  o.echo = !quiet;
  o.binary = std::filesystem::canonical("/proc/self/exe").string();
  ft::Supervisor sup(o);
  return sup.run();
}

ft::cli::Register register_launch("launch", "run training under a supervisor that restarts it after failures",
                                  run_launch);

}  // namespace

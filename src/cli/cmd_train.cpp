// fluxtrain train — trains a model from one TOML file, on one process or under mpirun.
#include <CLI/CLI.hpp>

#include <filesystem>

#include "cli/command.h"
#include "config/config.h"
#include "dist/job.h"
#include "fault/exit_codes.h"
#include "train/trainer.h"
#include "util/log.h"

namespace {

int run_train(int argc, char** argv) {
  CLI::App app{"Train a model: fluxtrain train --config FILE [--set key=value ...] [--nproc N]"};
  std::string config_path, run_dir, resume;
  std::vector<std::string> sets;
  int nproc = 0;
  app.add_option("--config", config_path, "TOML config file")->required();
  app.add_option("--set", sets, "override a config key, KEY=VALUE (repeatable)");
  app.add_option("--run-dir", run_dir, "run directory (train.run_dir)");
  app.add_option("--nproc", nproc, "start N ranks on this machine with mpirun");
  app.add_option("--resume", resume,
                 "resume from a checkpoint: 'auto' (the newest valid one under ckpt.dir) or a path (ckpt.resume)");
  CLI11_PARSE(app, argc, argv);
  if (!run_dir.empty()) sets.push_back("train.run_dir=\"" + run_dir + "\"");
  if (!resume.empty()) sets.push_back("ckpt.resume=\"" + resume + "\"");
  ft::Config cfg = ft::load_config(config_path, sets);  // errors show before any rank starts

  if (nproc > 0) {
    std::vector<std::string> args = {"/proc/self/exe"};
    args[0] = std::filesystem::canonical("/proc/self/exe").string();
    for (int i = 0; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--nproc") { ++i; continue; }
      if (a.rfind("--nproc=", 0) == 0) continue;
      args.push_back(a);
    }
    return ft::exec_under_mpirun(nproc, args);
  }

  ft::Job job(cfg.parallel, cfg.train.run_dir);
  try {
    ft::Trainer trainer(cfg, job.mesh());
    trainer.run();
  } catch (const ft::Error& e) {
    if (!job.multi_rank()) throw;
    // One rank's error must not leave the others waiting: report and stop the whole job.
    ft::log_error("{}{}{}", e.what(), e.hint().empty() ? "" : "\nhint: ", e.hint());
    // A communication failure (a peer died or hangs) is worth a restart; other errors are not.
    job.abort(dynamic_cast<const ft::CommError*>(&e) ? ft::kExitCommFailure : ft::kExitError);
  }
  return 0;
}

ft::cli::Register reg("train", "train a model from a TOML config (--nproc N for N local ranks)", run_train);

}  // namespace

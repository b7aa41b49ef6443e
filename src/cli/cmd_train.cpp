// fluxtrain train — trains a model from one TOML file.
#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "config/config.h"
#include "train/trainer.h"

namespace {

int run_train(int argc, char** argv) {
  CLI::App app{"Train a model: fluxtrain train --config FILE [--set key=value ...]"};
  std::string config_path, run_dir;
  std::vector<std::string> sets;
  app.add_option("--config", config_path, "TOML config file")->required();
  app.add_option("--set", sets, "override a config key, KEY=VALUE (repeatable)");
  app.add_option("--run-dir", run_dir, "run directory (train.run_dir)");
  CLI11_PARSE(app, argc, argv);
  if (!run_dir.empty()) sets.push_back("train.run_dir=\"" + run_dir + "\"");
  ft::Config cfg = ft::load_config(config_path, sets);
  ft::Trainer trainer(cfg);
  trainer.run();
  return 0;
}

ft::cli::Register reg("train", "train a model from a TOML config", run_train);

}  // namespace

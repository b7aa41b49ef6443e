// fluxtrain eval — the validation job: evaluates a checkpoint (by default the newest one of a run
// that verifies) on train.eval_batches validation batches and writes the result next to it.
//
//   fluxtrain eval --ckpt runs/tiny                      # newest valid checkpoint of the run
//   fluxtrain eval --ckpt runs/tiny/checkpoints/step_00000020 --out-dir runs/tiny/validation
//
// The config is the checkpoint's own (its manifest), unless --config names one; --set overrides
// either. Output: OUT_DIR/step_<N>.json (written atomically) and one line appended to
// OUT_DIR/validation.jsonl:
//   {"checkpoint": ".../step_00000020", "step": 20, "tokens": 5120, "val_loss": 4.81,
//    "val_bits_per_token": 6.94, "eval_batches": 2, "batch_size": 8, "seq_len": 32, "time": "..."}
#include <CLI/CLI.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ckpt/checkpointer.h"
#include "ckpt/ckpt_manifest.h"
#include "ckpt/probe.h"
#include "cli/command.h"
#include "config/config.h"
#include "parallel/ranks.h"
#include "train/trainer.h"
#include "util/config_binder.h"
#include "util/dir_check.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"

namespace fs = std::filesystem;

namespace {

int run_eval(int argc, char** argv) {
  CLI::App app{
      "Evaluate a checkpoint on validation batches: fluxtrain eval --ckpt RUN_DIR|CKPT_DIR "
      "[--out-dir DIR]"};
  std::string ckpt_path, config_path, out_dir;
  std::vector<std::string> sets;
  app.add_option("--ckpt", ckpt_path,
                 "a checkpoint (step_<N> directory), or a run directory / checkpoint root: its "
                 "newest valid checkpoint")
      ->required();
  app.add_option("--config", config_path, "TOML config (default: the checkpoint's own config)");
  app.add_option("--set", sets, "override a config key, KEY=VALUE (repeatable)");
  app.add_option("--out-dir", out_dir, "where results go (default: <run dir>/validation)");
  FT_PARSE(app, argc, argv);

  const std::string dir = ft::newest_valid_checkpoint(ckpt_path, "eval");
  ft::Config cfg;
  if (!config_path.empty()) {
    cfg = ft::load_config(config_path, sets);
  } else {
    cfg = ft::config_from_json(ft::CheckpointManifest::load(dir, nullptr).config);
    ft::ConfigBinder b;
    cfg.bind(b);
    for (const std::string& s : sets) {
      auto eq = s.find('=');
      if (eq == std::string::npos || eq == 0)
        throw ft::Error(fmt::format("--set {}: expected KEY=VALUE", s), "for example --set train.eval_batches=4");
      b.set(s.substr(0, eq), ft::parse_config_value(s.substr(eq + 1)), "--set");
    }
    cfg.train.validate();  // --set train.eval_batches=0 and the like, said before any work
  }
  if (out_dir.empty()) out_dir = fs::path(dir).parent_path().parent_path().string() + "/validation";
  // One process (or the ranks mpirun started): the layout is this job's, not the trainer's.
  if (!std::getenv("OMPI_COMM_WORLD_SIZE") && !std::getenv("PMIX_RANK") && !std::getenv("PMI_SIZE"))
    cfg.parallel.dp = cfg.parallel.tp = cfg.parallel.pp = 1;
  cfg.train.run_dir = out_dir;  // its config.json; the training run's files stay untouched
  cfg.train.eval_interval = std::max<int64_t>(cfg.train.eval_interval, 1);  // builds the validation loader
  cfg.ckpt.resume = dir;
  cfg.ckpt.interval = 0;
  cfg.metrics.enabled = false;
  cfg.fault.record_samples = false;
  cfg.validate();

  // Said before the evaluation, not as a raw library error after it.
  ft::check_dir_writable(out_dir, "--out-dir", "give a directory for the results (default: <run dir>/validation)");
  ft::Ranks ranks(cfg.parallel, out_dir);
  ft::Trainer trainer(cfg, ranks.mesh());
  const double val = trainer.evaluate();
  if (ranks.mesh().world_rank() != 0) return 0;
  nlohmann::json r = {{"checkpoint", fs::absolute(dir).string()},
                      {"step", trainer.steps_done()},
                      {"val_loss", val},
                      {"val_bits_per_token", val / std::log(2.0)},
                      {"eval_batches", cfg.train.eval_batches},
                      {"batch_size", cfg.train.batch_size},
                      {"seq_len", cfg.train.seq_len},
                      {"time", ft::utc_timestamp()}};
  if (!std::isfinite(val)) r["val_loss"] = nullptr;
  fs::create_directories(out_dir);
  const std::string out = fmt::format("{}/step_{:08d}.json", out_dir, trainer.steps_done());
  ft::write_file_atomic(out, r.dump(2) + "\n");
  std::ofstream(out_dir + "/validation.jsonl", std::ios::app) << r.dump() << "\n";
  ft::log_info("eval: {} (step {}): val_loss {:.4f} over {} batch(es); wrote {}", dir, trainer.steps_done(), val,
               cfg.train.eval_batches, out);
  return std::isfinite(val) ? 0 : 1;
}

ft::cli::Register register_eval("eval", "evaluate a checkpoint on validation batches (the validation job)", run_eval);

}  // namespace

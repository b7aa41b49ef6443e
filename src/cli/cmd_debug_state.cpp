// fluxtrain debug-state — runs the real trainer for a few steps and writes everything an
// outside oracle needs to check it into one safetensors file (llm.c's "debug state" idea):
// the initial weights, each step's batch, the logits of the first batch, the gradients of the
// first step, and each step's loss, learning rate and gradient norm, plus the final weights.
// tests/oracle/ replays the same steps in PyTorch and compares.
#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "config/config.h"
#include "model/activation_sizes.h"
#include "parallel/ranks.h"
#include "train/trainer.h"
#include "util/output_path.h"
#include "util/safetensors.h"

namespace {

void add_params(ft::SafetensorsWriter& w, const std::string& prefix, const ft::ParamLayout& layout, const float* arena,
                bool write) {
  if (!write) return;
  for (const auto& p : layout.specs())
    w.add(prefix + p.name, "F32", p.shape, arena + p.offset, static_cast<size_t>(p.numel()) * 4);
}

int run_debug_state(int argc, char** argv) {
  CLI::App app{"Write a debug state for the PyTorch oracle"};
  std::string config_path, out;
  std::vector<std::string> sets;
  int64_t steps = 5;
  app.add_option("--config", config_path, "TOML config")->required();
  app.add_option("--set", sets, "override KEY=VALUE");
  app.add_option("--out", out, "output .safetensors")->required();
  app.add_option("--steps", steps, "optimizer steps to record");
  FT_PARSE(app, argc, argv);
  ft::check_output_path(out, ft::OutputRule{.flag = "--out",
                                            .kind = "safetensors file",
                                            .inputs = {config_path},
                                            .is_ours = ft::is_safetensors_file,
                                            .replaces_own = true});

  ft::Config cfg = ft::load_config(config_path, sets);
  ft::Ranks ranks(cfg.parallel, cfg.train.run_dir);
  ft::Trainer trainer(cfg, ranks.mesh());
  auto batches = ft::make_loader(cfg.data, cfg.train.batch_spec(), cfg.model.vocab_size, 0, 1, ft::Split::kTrain);
  const auto& layout = trainer.params().layout();
  const int64_t B = cfg.train.batch_size, T = cfg.train.seq_len, V = cfg.model.vocab_size;

  ft::SafetensorsWriter w;
  const bool rank0 = ranks.mesh().world_rank() == 0;
  std::vector<float> weights(static_cast<size_t>(layout.total()));
  trainer.params().gather_weights(weights.data());
  add_params(w, "init.", layout, weights.data(), rank0);
  std::vector<float> losses, lrs, norms;
  for (int64_t s = 1; s <= steps; ++s) {
    ft::Batch b = batches->next();
    w.add("batch." + std::to_string(s), "I32", {B, T + 1}, b.tokens.data(), b.tokens.size() * 4);
    if (s == 1) {
      ft::Activations acts;
      const ft::Precision p = trainer.model().precision();
      acts.allocate(cfg.model, B, T, ft::loss_chunk_tokens(cfg.model, 0, B * T, p), {}, {}, p);
      std::vector<float> logits(static_cast<size_t>(B * T * V));
      trainer.model().forward_logits(trainer.params(), acts, b.tokens.data(), logits.data());
      w.add("logits", "F32", {B * T, V}, logits.data(), logits.size() * 4);
    }
    ft::StepStats st = trainer.step();
    if (s == 1 && ranks.mesh().world_size() == 1) add_params(w, "grad.", layout, trainer.params().grads(0), rank0);
    losses.push_back(static_cast<float>(st.loss));
    lrs.push_back(static_cast<float>(st.lr));
    norms.push_back(static_cast<float>(st.grad_norm));
  }
  trainer.params().gather_weights(weights.data());
  add_params(w, "final.", layout, weights.data(), rank0);
  w.add("losses", "F32", {steps}, losses.data(), losses.size() * 4);
  w.add("lrs", "F32", {steps}, lrs.data(), lrs.size() * 4);
  w.add("grad_norms", "F32", {steps}, norms.data(), norms.size() * 4);
  w.metadata("config", cfg.to_json().dump());
  if (rank0) w.write(out);
  return 0;
}

ft::cli::Register register_debug_state("debug-state",
                                       "write a debug state (weights, batches, logits, grads, losses) for oracles",
                                       run_debug_state);

}  // namespace

#include "launch/ckpt_probe.h"

#include <filesystem>

namespace ft {

// Placeholder until the checkpoint module lands: a step directory with a manifest.
std::string checkpoint_root(const Config& cfg) { return cfg.train.run_dir + "/checkpoints"; }
bool checkpoints_enabled(const Config&) { return true; }

std::optional<ProbedCheckpoint> newest_valid_checkpoint(const Config& cfg) {
  namespace fs = std::filesystem;
  std::optional<ProbedCheckpoint> best;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(checkpoint_root(cfg), ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("step_", 0) != 0 || !fs::exists(e.path() / "manifest.json")) continue;
    int64_t step = std::atoll(name.c_str() + 5);
    if (!best || step > best->step) best = ProbedCheckpoint{e.path().string(), step};
  }
  return best;
}

}  // namespace ft

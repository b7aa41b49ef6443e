// Monitoring cost per training step, measured in one run: the tiny model's real training step
// (the peer) against what monitoring adds to each step — Telemetry::on_step with TensorBoard
// events, plus a share of one /metrics exposition per step (a scrape every second would be far
// less) — printed as a ratio last. Steadier than bench/metrics_overhead.sh on a busy machine,
// which compares whole runs.
//
//   build/bench/metrics_overhead_micro [CONFIG]      # default configs/tiny.toml
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "config/config.h"
#include "obs/telemetry.h"
#include "parallel/mesh.h"
#include "train/trainer.h"

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string config = argc > 1 ? argv[1] : "configs/tiny.toml";
  auto dir = std::filesystem::temp_directory_path() / ("ft_obs_bench_" + std::to_string(::getpid()));
  ft::Config cfg = ft::load_config(
      config, {"train.run_dir=\"" + dir.string() + "\"", "train.eval_interval=0", "metrics.gpu_interval_s=0"});
  // The peer: real training steps.
  ft::Mesh mesh = ft::Mesh::single();
  ft::Trainer trainer(cfg, mesh);
  std::vector<double> step_s;
  trainer.step();  // warm-up
  for (int i = 0; i < 20; ++i) {
    double t0 = now();
    trainer.step();
    step_s.push_back(now() - t0);
  }

  // Us: what monitoring adds per step, on a registry as the trainer has it.
  ft::MetricsConfig mc = cfg.metrics;
  mc.enabled = false;  // expose() is timed directly; the HTTP hop is the kernel's
  mc.tensorboard = true;
  ft::obs::Telemetry tel(mc, {}, (dir / "tel").string(), 1000000);
  tel.set_checkpoint_interval_steps(100);
  const int kCalls = 200000;
  std::vector<double> on_step_ns;
  for (int rep = 0; rep < 5; ++rep) {
    double t0 = now();
    for (int i = 1; i <= kCalls; ++i) {
      tel.on_step({.step = i,
                   .loss = 2.5,
                   .lr = 3e-4,
                   .grad_norm = 0.9,
                   .tokens = 256,
                   .tokens_per_s = 1e4,
                   .step_s = 0.1,
                   .mfu = 0.4,
                   .data_wait_s = 0.001});
      tel.comm(ft::obs::CommOp::kAllReduce, 1 << 20, 0.001, 1);
    }
    on_step_ns.push_back((now() - t0) / kCalls * 1e9);
  }
  std::vector<double> expose_us;
  size_t bytes = 0;
  for (int i = 0; i < 200; ++i) {
    double t0 = now();
    bytes = tel.registry().expose().size();
    expose_us.push_back((now() - t0) * 1e6);
  }
  std::filesystem::remove_all(dir);

  double step = median(step_s), per_step = median(on_step_ns) * 1e-9 + median(expose_us) * 1e-6;
  std::printf("training step (%s):            %.3f ms (median of %zu)\n", config.c_str(), step * 1e3, step_s.size());
  std::printf("Telemetry::on_step + comm:     %.0f ns (TensorBoard on)\n", median(on_step_ns));
  std::printf("one /metrics exposition:       %.1f us (%zu bytes)\n", median(expose_us), bytes);
  std::printf("monitoring / step (one scrape per step, worst case): %.6f\n", per_step / step);
  return 0;
}

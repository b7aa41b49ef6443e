// A stand-in for one training rank, for the monitoring tests until `fluxtrain train` serves
// them itself: it feeds obs::Telemetry a plausible loss curve, throughput, evaluations,
// checkpoints and collectives at a fixed step period, and stops by itself.
//
//   obs_demo_server --rank 1 --world 2 --local-rank 1 --port 9450 --seconds 30   # serves 9451
//   obs_demo_server --dump --steps 5        # print the exposition after 5 steps, then exit
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "obs/telemetry.h"
#include "util/error.h"

int main(int argc, char** argv) {
  CLI::App app{"Serve fluxtrain metrics for a simulated training rank"};
  ft::MetricsConfig cfg;
  ft::obs::RankInfo rank;
  std::string run_dir = "/tmp/ft_obs_demo";
  int64_t steps = 1000000;
  double step_ms = 100, seconds = 60;
  bool dump = false, tensorboard = false;
  cfg.enabled = true;
  cfg.bind_address = "127.0.0.1";
  app.add_option("--rank", rank.rank);
  app.add_option("--world", rank.world_size);
  app.add_option("--local-rank", rank.local_rank);
  app.add_option("--dp", rank.dp);
  app.add_option("--tp", rank.tp);
  app.add_option("--pp", rank.pp);
  app.add_option("--gpu", rank.gpu, "NVML index of this rank's GPU (-1 = none)");
  app.add_option("--host", rank.host, "the host label of every series (as a trainer's rank sets it)");
  app.add_option("--cuda-device", rank.cuda_device,
                 "the CUDA device this rank drives (its local rank), found through CUDA_VISIBLE_DEVICES");
  app.add_option("--port", cfg.port, "metrics.port (the rank serves port + local rank)");
  app.add_option("--gpu-interval", cfg.gpu_interval_s);
  app.add_option("--run-dir", run_dir);
  app.add_option("--steps", steps);
  app.add_option("--step-ms", step_ms);
  app.add_option("--seconds", seconds, "stop after this long");
  app.add_flag("--dump", dump, "print the exposition after the steps and exit (no HTTP)");
  app.add_flag("--tensorboard", tensorboard, "rank 0 writes RUN_DIR/tb event files");
  CLI11_PARSE(app, argc, argv);
  if (dump) cfg.enabled = false;
  cfg.tensorboard = tensorboard;
  try {
    ft::obs::Telemetry tel(cfg, rank, run_dir, steps);
    tel.set_checkpoint_interval_steps(100);
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t s = 1; s <= steps; ++s) {
      double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (elapsed > seconds) break;
      double step_s = step_ms / 1000 * (1 + 0.1 * std::sin(0.7 * static_cast<double>(s)));
      if (!dump) std::this_thread::sleep_for(std::chrono::duration<double>(step_s));
      double tokens = 8 * 1024;
      tel.on_step({.step = s,
                   .loss = 1.5 + 4.0 * std::exp(-static_cast<double>(s) / 200),
                   .lr = 3e-4,
                   .grad_norm = 0.8,
                   .tokens = static_cast<int64_t>(tokens),
                   .tokens_per_s = tokens / step_s,
                   .step_s = step_s,
                   .mfu = 0.42,
                   .data_wait_s = 0.002});
      tel.comm(ft::obs::CommOp::kAllReduce, 64 << 20, 0.01);
      if (s % 10 == 0) tel.on_eval(s, 1.4 + 4.0 * std::exp(-static_cast<double>(s) / 200), 1.2);
      if (s % 100 == 0) tel.on_checkpoint(s, 0.8, true);
      if (std::string why = tel.gpu_fault(); !why.empty()) {  // as a trainer's rank does: stop, say why
        std::fprintf(stderr, "error: %s\n", why.c_str());
        return 6;
      }
    }
    if (dump) std::fputs(tel.registry().expose().c_str(), stdout);
  } catch (const ft::Error& e) {
    std::fprintf(stderr, "error: %s\nhint: %s\n", e.what(), e.hint().c_str());
    return 2;
  }
  return 0;
}

// The planner against the trainer on this machine: train a step with `fluxtrain train`, then
// `fluxtrain plan --calibrate RUN_DIR --json` compares the planner's memory for the run's layout
// with the allocator's accounting in metrics.jsonl (mem_peak_bytes); they must agree within 10%.
// For each recompute mode (none, selective, full) the activations alone — the planner's and the
// dry run's (`fluxtrain train --dry-run --gpu cpu --json`) — must be the allocator's within 5%.
// tiny runs always (seconds); llama-125m runs when FT_SLOW_TESTS=1 (minutes on 2 cores).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "plan/catalog.h"
#include "util/fs.h"

namespace ft::plan {
namespace {

struct CliResult {
  int status = -1;
  std::string out;
};

CliResult run_cli(const std::string& args) {
  const std::string cmd = std::string(FT_FLUXTRAIN_BIN) + " " + args + " 2>&1";
  CliResult r;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(cmd.c_str(), "r"), ::pclose);
  if (!pipe) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe.get())) > 0) r.out.append(buf, n);
  r.status = ::pclose(pipe.release());
  return r;
}

struct Case {
  const char* name;
  const char* config;
  std::string sets;
  int nproc;
  bool activations = false;  // also check the activation bytes (planner, dry run) within 5%
};

std::string run_dir(const char* name) {
  return (std::filesystem::temp_directory_path() / ("ft_plan_mem_" + std::to_string(::getpid())) / name).string();
}

// Trains one step and returns the calibration JSON for the run.
nlohmann::json train_and_calibrate(const Case& c) {
  const std::string dir = run_dir(c.name);
  std::string cmd = std::string("train --config ") + FT_SOURCE_DIR + "/" + c.config +
                    " --set train.steps=1 --set train.eval_interval=0 --run-dir " + dir + " " + c.sets;
  if (c.nproc > 1) cmd += " --nproc " + std::to_string(c.nproc);
  CliResult t = run_cli(cmd);
  EXPECT_EQ(t.status, 0) << t.out;
  CliResult p = run_cli("plan --calibrate " + dir + " --json");
  EXPECT_EQ(p.status, 0) << p.out;
  if (p.status != 0) return {};
  return nlohmann::json::parse(p.out);
}

// The activation bytes the allocator counted against the planner's and the dry run's.
void check_activations(const Case& c, const nlohmann::json& planned) {
  const double measured = planned["measured_bytes"].get<double>();
  const double planner = planned["planner_bytes"].get<double>();
  CliResult d = run_cli(std::string("train --config ") + FT_SOURCE_DIR + "/" + c.config +
                        " --set train.steps=1 --set train.eval_interval=0 --dry-run --gpu cpu --json --world-size " +
                        std::to_string(c.nproc) + " " + c.sets);
  ASSERT_EQ(d.status, 0) << d.out;
  const double dry = nlohmann::json::parse(d.out)["ranks"][0]["memory_bytes"]["activations"].get<double>();
  std::printf("%-16s activations: allocator %.0f, planner %.0f (%.4f), dry run %.0f (%.4f)\n\n", c.name, measured,
              planner, planner / measured, dry, dry / measured);
  ASSERT_GT(measured, 0) << c.name;
  EXPECT_NEAR(planner / measured, 1.0, 0.05) << c.name;
  EXPECT_NEAR(dry / measured, 1.0, 0.05) << c.name;
}

void check(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    nlohmann::json j = train_and_calibrate(c);
    ASSERT_TRUE(j.contains("runs")) << c.name;
    const auto& run = j["runs"][0];
    std::printf("%-16s %-22s %12s %12s\n", c.name, "category (bytes)", "planner", "trainer");
    for (auto it = run["memory"].begin(); it != run["memory"].end(); ++it)
      std::printf("%-16s %-22s %12.0f %12.0f\n", "", it.key().c_str(), (*it)["planner_bytes"].get<double>(),
                  (*it)["measured_bytes"].get<double>());
    const double ratio = run["memory_ratio"].get<double>();
    std::printf("%-16s planner / trainer peak = %.3f\n\n", c.name, ratio);
    EXPECT_GT(ratio, 0.9) << c.name;
    EXPECT_LT(ratio, 1.1) << c.name;
    if (c.activations) check_activations(c, run["memory"]["activations"]);
  }
  std::filesystem::remove_all(std::filesystem::path(run_dir("x")).parent_path());
}

TEST(PlanTrainerMemory, Tiny) {
  check({{"tiny", "configs/tiny.toml", "", 1, true},
         {"tiny-recompute", "configs/tiny.toml", "--set model.recompute=full", 1, true},
         {"tiny-selective", "configs/tiny.toml", "--set model.recompute=selective", 1, true},
         {"tiny-microbatch", "configs/tiny.toml", "--set train.micro_batch_size=2", 1},
         {"tiny-dp2-zero0", "configs/tiny.toml", "--set parallel.dp=2", 2},
         {"tiny-dp2-zero1", "configs/tiny.toml", "--set parallel.dp=2 --set parallel.zero=1", 2},
         {"tiny-dp2-zero2", "configs/tiny.toml", "--set parallel.dp=2 --set parallel.zero=2", 2},
         {"tiny-dp2-zero3", "configs/tiny.toml", "--set parallel.dp=2 --set parallel.zero=3", 2}});
}

TEST(PlanTrainerMemory, Llama125m) {
  if (!std::getenv("FT_SLOW_TESTS")) GTEST_SKIP() << "set FT_SLOW_TESTS=1 (several minutes on 2 cores)";
  const std::string small = "--set train.seq_len=64 --set train.batch_size=2";
  check({{"125m", "configs/llama-125m.toml", small, 1, true},
         {"125m-recompute", "configs/llama-125m.toml", small + " --set model.recompute=full", 1, true},
         {"125m-selective", "configs/llama-125m.toml", small + " --set model.recompute=selective", 1, true},
         {"125m-dp2-zero3", "configs/llama-125m.toml", small + " --set parallel.dp=2 --set parallel.zero=3", 2}});
}

// The fitted efficiency round-trips: --out writes a [gpu] file that --gpu-file reads back, and
// the plan for the run's config with it reproduces the measured step time.
TEST(PlanTrainerMemory, CalibrationRoundTrip) {
  const std::string dir = run_dir("calib");
  CliResult t = run_cli(std::string("train --config ") + FT_SOURCE_DIR +
                        "/configs/tiny.toml --set train.steps=4 --set train.eval_interval=0 --run-dir " + dir);
  ASSERT_EQ(t.status, 0) << t.out;
  const std::string toml = dir + "/cpu.toml";
  CliResult c = run_cli("plan --calibrate " + dir + " --out " + toml + " --json");
  ASSERT_EQ(c.status, 0) << c.out;
  const double measured = nlohmann::json::parse(c.out)["runs"][0]["measured_step_s"].get<double>();
  CliResult p = run_cli(std::string("plan --config ") + FT_SOURCE_DIR + "/configs/tiny.toml --gpu cpu --gpu-file " +
                        toml + " --json");
  ASSERT_EQ(p.status, 0) << p.out;
  const double planned = nlohmann::json::parse(p.out)["step_time_s"].get<double>();
  EXPECT_NEAR(planned / measured, 1.0, 1e-3) << "planned " << planned << " s, measured " << measured << " s";
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
}

}  // namespace
}  // namespace ft::plan

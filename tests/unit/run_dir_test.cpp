// train/run_dir and train/stop_request: a run directory is claimed before anything is written to
// it; a time budget or a signal becomes a stop at the next step boundary (issue 14.7, 14.9).
#include "train/run_dir.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include "config/config.h"
#include "data_test_util.h"
#include "parallel/mesh.h"
#include "train/stop_request.h"
#include "util/error.h"

namespace ft {
namespace {

namespace fs = std::filesystem;

Config at(const std::string& dir, const std::string& resume = "") {
  Config c = load_config("", {});
  c.train.run_dir = dir;
  c.ckpt.resume = resume;
  return c;
}

std::string error_of(const Config& c, bool force, RunDirUser user = RunDirUser::kTrain) {
  try {
    claim_run_dir(c, force, user);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RunDir, AFreshStartNeverOverwritesARun) {
  const std::string d = testing::scratch_dir("run_dir") + "/run";
  EXPECT_EQ(error_of(at(d), false), "");  // nothing there yet
  fs::create_directories(d + "/checkpoints/step_00000002");
  std::ofstream(d + "/metrics.jsonl") << "{\"step\": 1}\n";
  std::ofstream(d + "/config.json") << R"({"model": {}, "train": {}})";
  std::ofstream(d + "/supervisor.jsonl") << "{}\n";
  EXPECT_NE(error_of(at(d), false).find("already holds a run (config.json, metrics.jsonl, checkpoints)"),
            std::string::npos);
  EXPECT_EQ(error_of(at(d, "auto"), false), "");  // resuming appends
  EXPECT_NE(error_of(at(d, "auto"), true).find("--force starts the run over"), std::string::npos);
  // The supervisor's own files belong to its launcher when a rank claims, to an earlier run when
  // the supervisor does.
  fs::remove(d + "/metrics.jsonl"), fs::remove(d + "/config.json"), fs::remove_all(d + "/checkpoints");
  EXPECT_EQ(error_of(at(d), false), "");
  EXPECT_NE(error_of(at(d), false, RunDirUser::kSupervisor).find("supervisor.jsonl"), std::string::npos);
  // --force keeps the earlier run aside.
  std::ofstream(d + "/metrics.jsonl") << "{\"step\": 1}\n";
  std::vector<std::string> moved = claim_run_dir(at(d), true, RunDirUser::kSupervisor);
  EXPECT_EQ(moved.size(), 2u);
  EXPECT_FALSE(fs::exists(d + "/metrics.jsonl"));
  int aside = 0;
  for (const auto& e : fs::directory_iterator(d))
    if (e.path().filename().string().rfind("replaced-", 0) == 0 && fs::exists(e.path() / "metrics.jsonl")) ++aside;
  EXPECT_EQ(aside, 1);
}

TEST(RunDir, AnotherProgramsDirectoryIsRefusedEvenWithForce) {
  const std::string d = testing::scratch_dir("run_dir_hf");
  std::ofstream(d + "/config.json") << R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama"})";
  for (bool force : {false, true})
    EXPECT_NE(error_of(at(d), force).find("holds a config.json that is not a fluxtrain run's"), std::string::npos);
  EXPECT_NE(error_of(at(d, "auto"), false).find("not a fluxtrain run's"), std::string::npos);
}

TEST(StopRequest, TimeBudgetAndSignalStopAtTheBoundary) {
  Mesh mesh = Mesh::single();
  StopRequest none(0), later(60), spent(1e-9);
  EXPECT_FALSE(none.agreed(mesh.world()));
  EXPECT_FALSE(later.agreed(mesh.world()));
  // The process age has the clock-tick resolution of /proc (10 ms): a fresh process may read 0.
  // Bounded waits (30 s) end as soon as the state is seen: only a hang can reach the bound.
  std::optional<std::string> why;
  for (int i = 0; i < 3000 && !(why = spent.agreed(mesh.world())); ++i) ::usleep(10000);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("train.stop_after_minutes"), std::string::npos);
  // A real SIGUSR1 to this process: the signal thread records it; the boundary reports it.
  StopRequest::set_grace(600);
  StopRequest::install();
  ::kill(::getpid(), SIGUSR1);
  for (int i = 0; i < 30000 && StopRequest::signal_received() == 0; ++i) ::usleep(1000);
  EXPECT_EQ(StopRequest::signal_received(), SIGUSR1);
  why = none.agreed(mesh.world());
  ASSERT_TRUE(why);
  EXPECT_EQ(*why, "SIGUSR1");
  StopRequest::done();  // the grace watchdog stands down
}

}  // namespace
}  // namespace ft

// A relaunched run (launch/earlier_launch.h): the attempts of the launches before it and their
// badput, its steps after the resumed checkpoint moved to lost work — read from files written here
// in the formats the supervisor and the trainer write.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "config/config.h"
#include "launch/earlier_launch.h"
#include "obs/badput.h"

namespace ft {
namespace {

std::string fresh_dir(const std::string& name) {
  const std::string d = (std::filesystem::temp_directory_path() / ("ft_earlier_launch_" + name)).string();
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// Steps 1..n, each 2 s productive; the job started at 1000 with 4 s of start-up.
void write_metrics(const std::string& dir, int n) {
  std::ofstream out(dir + "/metrics.jsonl");
  obs::BadputTotals t;
  t.started_at = 1000;
  t.seconds[static_cast<size_t>(obs::BadputKind::kStartup)] = 4;
  for (int s = 1; s <= n; ++s) {
    t.productive_s += 2;
    t.at = 1004 + 2.0 * s;
    out << nlohmann::json{{"step", s}, {"loss", 5.0}, {"productive_s", 2.0}, {"badput", t.to_json()}}.dump() << "\n";
  }
}

Config resumed(const std::string& dir, const std::string& resume) {
  Config c;
  c.train.run_dir = dir;
  c.ckpt.resume = resume;
  return c;
}

TEST(EarlierLaunch, CountsItsAttemptsAndCarriesItsBadputToTheResumedCheckpoint) {
  const std::string d = fresh_dir("carry");
  {
    std::ofstream ev(d + "/supervisor.jsonl");
    ev << R"({"event":"start","attempt":1,"time":1000.5})"
       << "\n"
       << R"({"event":"failure","attempt":1,"time":1010})"
       << "\n"
       << R"({"event":"start","attempt":2,"time":1012})"
       << "\n"
       << R"({"event":"start","attempt":3,"ti)";  // cut by a kill: skipped
  }
  write_metrics(d, 25);
  const EarlierLaunch e = read_earlier_launch(d, resumed(d, d + "/checkpoints/step_00000020"));
  EXPECT_EQ(e.attempts, 2);
  EXPECT_EQ(e.resume_step, 20);
  EXPECT_DOUBLE_EQ(e.last_event_at, 1012);
  ASSERT_TRUE(e.badput.has_value());
  EXPECT_DOUBLE_EQ(e.badput->started_at, 1000);
  EXPECT_DOUBLE_EQ(e.badput->at, 1054);
  EXPECT_DOUBLE_EQ(e.badput->productive_s, 40);                                              // steps 1..20 kept
  EXPECT_DOUBLE_EQ(e.badput->seconds[static_cast<size_t>(obs::BadputKind::kLostWork)], 10);  // 21..25 redone
  EXPECT_DOUBLE_EQ(e.badput->productive_s + e.badput->bad_s(), e.badput->wall_s());
}

TEST(EarlierLaunch, NothingBeforeMeansAFreshCount) {
  const std::string d = fresh_dir("none");
  const EarlierLaunch e = read_earlier_launch(d, resumed(d, "auto"));
  EXPECT_EQ(e.attempts, 0);
  EXPECT_FALSE(e.badput.has_value());
}

}  // namespace
}  // namespace ft

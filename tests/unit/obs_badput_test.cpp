// Badput accounting (obs/badput.h) on a made-up timeline whose right answers follow from the
// definitions: every second lands in exactly one bucket or in productive time.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "obs/badput.h"

namespace ft::obs {
namespace {

double bucket(const BadputTotals& t, BadputKind k) {
  return t.seconds[static_cast<size_t>(k)];
}

BadputTotals job_at(double started) {
  BadputTotals t;
  t.started_at = t.at = started;
  return t;
}

TEST(Badput, EverySecondOfATimelineLandsInOneBucket) {
  Badput b(job_at(100), BadputKind::kStartup);
  b.step_begins(103);                                      // 3 s start-up
  b.step_ends(110, /*step=*/1, /*data_wait_s=*/2, false);  // 2 s data wait, 5 s productive
  b.enter(BadputKind::kEval, 111);                         // 1 s between steps
  b.enter(BadputKind::kOther, 114);                        // 3 s evaluation
  b.enter(BadputKind::kCheckpoint, 114.5);                 // 0.5 s other
  b.step_begins(116.5);                                    // 2 s checkpoint stall
  b.step_ends(120.5, 2, 0, /*skipped=*/true);              // 4 s of a skipped update
  b.step_begins(120.5);
  b.step_ends(126.5, 3, 0.5, false);     // 5.5 s productive
  b.straggled(3, 1.5);                   // of which 1.5 s waiting for a straggler
  const BadputTotals t = b.totals(127);  // 0.5 s other

  EXPECT_DOUBLE_EQ(bucket(t, BadputKind::kStartup), 3);
  EXPECT_DOUBLE_EQ(bucket(t, BadputKind::kDataWait), 2.5);
  EXPECT_DOUBLE_EQ(bucket(t, BadputKind::kEval), 3);
  EXPECT_DOUBLE_EQ(bucket(t, BadputKind::kCheckpoint), 2);
  EXPECT_DOUBLE_EQ(bucket(t, BadputKind::kSkipped), 4);
  EXPECT_DOUBLE_EQ(bucket(t, BadputKind::kStraggler), 1.5);
  EXPECT_DOUBLE_EQ(bucket(t, BadputKind::kOther), 2);
  EXPECT_DOUBLE_EQ(t.productive_s, 5 + 4);
  EXPECT_DOUBLE_EQ(b.step_productive_s(3), 4);
  EXPECT_DOUBLE_EQ(b.step_productive_s(2), 0);
  EXPECT_DOUBLE_EQ(t.wall_s(), 27);
  EXPECT_DOUBLE_EQ(t.productive_s + t.bad_s(), t.wall_s());
  EXPECT_DOUBLE_EQ(t.goodput(), 9.0 / 27);
}

TEST(Badput, ARollbackTurnsTheStepsAfterTheCheckpointIntoLostWork) {
  Badput b(job_at(0), BadputKind::kStartup);
  double now = 1;
  for (int64_t s = 1; s <= 5; ++s) {
    b.step_begins(now);
    b.step_ends(now + 2, s, 0, false);
    now += 2;
  }
  b.enter(BadputKind::kRestart, now);  // loading step 2's checkpoint: 1 s
  b.roll_back(2);
  b.enter(BadputKind::kOther, now + 1);
  const BadputTotals t = b.totals(now + 1);
  EXPECT_DOUBLE_EQ(t.productive_s, 4);                    // steps 1 and 2
  EXPECT_DOUBLE_EQ(bucket(t, BadputKind::kLostWork), 6);  // steps 3..5
  EXPECT_DOUBLE_EQ(bucket(t, BadputKind::kRestart), 1);
  EXPECT_DOUBLE_EQ(b.step_productive_s(4), 0);
  EXPECT_DOUBLE_EQ(t.productive_s + t.bad_s(), t.wall_s());
}

TEST(Badput, AStepThatNeverEndsIsLostWork) {
  Badput b(job_at(0), BadputKind::kStartup);
  b.step_begins(1);
  const BadputTotals t = (b.enter(BadputKind::kCheckpoint, 4), b.totals(5));  // the final save after a throw
  EXPECT_DOUBLE_EQ(bucket(t, BadputKind::kLostWork), 3);
  EXPECT_DOUBLE_EQ(bucket(t, BadputKind::kCheckpoint), 1);
}

TEST(Badput, ARestartCarriesTheFailedAttemptsTotalsAndLosesItsStepsAfterTheCheckpoint) {
  // The failed attempt's last row: 40 s into the job, 30 s productive over steps 1..6 (5 s each).
  BadputTotals last = job_at(1000);
  last.at = 1040, last.productive_s = 30;
  last.seconds[static_cast<size_t>(BadputKind::kStartup)] = 10;
  std::vector<MetricsRecord> rows(6);
  for (size_t i = 0; i < rows.size(); ++i) rows[i].step = static_cast<int64_t>(i) + 1, rows[i].productive_s = 5;
  const BadputTotals before = carry_over_restart(last, rows, /*resume_step=*/4);
  EXPECT_DOUBLE_EQ(before.productive_s, 20);
  EXPECT_DOUBLE_EQ(bucket(before, BadputKind::kLostWork), 10);
  EXPECT_DOUBLE_EQ(before.productive_s + before.bad_s(), before.wall_s());

  // The next process: from the row's time to its first step is the restart.
  ::setenv("FLUXTRAIN_BADPUT_BEFORE", before.to_json().dump().c_str(), 1);
  Badput b = Badput::from_env(1050);
  ::unsetenv("FLUXTRAIN_BADPUT_BEFORE");
  b.step_begins(1052);
  b.step_ends(1057, 5, 0, false);
  const BadputTotals t = b.totals(1057);
  EXPECT_DOUBLE_EQ(bucket(t, BadputKind::kRestart), 12);
  EXPECT_DOUBLE_EQ(t.productive_s, 25);
  EXPECT_DOUBLE_EQ(t.wall_s(), 57);
  EXPECT_DOUBLE_EQ(t.productive_s + t.bad_s(), t.wall_s());
}

TEST(Badput, FromEnvWithoutTheSupervisorStartsAtTheJobStartAsStartup) {
  ::setenv("FLUXTRAIN_JOB_STARTED_AT", "500", 1);
  Badput b = Badput::from_env(510);
  ::unsetenv("FLUXTRAIN_JOB_STARTED_AT");
  b.step_begins(512);
  EXPECT_DOUBLE_EQ(bucket(b.totals(512), BadputKind::kStartup), 12);
  // A damaged FLUXTRAIN_BADPUT_BEFORE is ignored (warned), not fatal.
  ::setenv("FLUXTRAIN_BADPUT_BEFORE", "{\"at\": 1}", 1);
  Badput c = Badput::from_env(600);
  ::unsetenv("FLUXTRAIN_BADPUT_BEFORE");
  EXPECT_EQ(bucket(c.totals(600), BadputKind::kRestart), 0);
}

TEST(Badput, TheLastRowWithBadputIsReadAndACutLineIsSkipped) {
  const std::string path = (std::filesystem::temp_directory_path() / "ft_badput_rows.jsonl").string();
  BadputTotals a = job_at(0), b = job_at(0);
  a.at = 10, a.productive_s = 4, b.at = 20, b.productive_s = 9;
  {
    std::ofstream out(path);
    out << nlohmann::json{{"step", 1}, {"badput", a.to_json()}}.dump() << "\n";
    out << nlohmann::json{{"step", 2}, {"badput", b.to_json()}}.dump() << "\n";
    out << "{\"step\": 3, \"badput\": {\"started_at\": 0, \"at\":";  // killed mid-line
  }
  const auto t = last_badput_row(path);
  ASSERT_TRUE(t.has_value());
  EXPECT_DOUBLE_EQ(t->at, 20);
  EXPECT_DOUBLE_EQ(t->productive_s, 9);
  std::filesystem::remove(path);
  EXPECT_FALSE(last_badput_row(path).has_value());
}

TEST(Badput, TheSummaryNamesTheLargestBucketsFirst) {
  BadputTotals t = job_at(0);
  t.seconds[static_cast<size_t>(BadputKind::kEval)] = 1;
  t.seconds[static_cast<size_t>(BadputKind::kCheckpoint)] = 3;
  EXPECT_EQ(badput_summary(t), "badput: checkpoint 3.0 s, evaluation 1.0 s");
  EXPECT_EQ(badput_summary(job_at(0)), "no badput");
}

}  // namespace
}  // namespace ft::obs

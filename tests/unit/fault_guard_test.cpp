// Training guards (fault/step_guard.h) and test-only fault injection (fault/inject.h).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "fault/inject.h"
#include "fault/step_guard.h"
#include "fault/training_faults.h"
#include "obs/registry.h"
#include "parallel/mesh.h"
#include "util/error.h"

namespace ft {
namespace {

FaultConfig small_window() {
  FaultConfig c;
  c.spike_window = 20;
  c.spike_min_history = 10;
  c.spike_zscore = 6;
  c.spike_rollback_after = 3;
  return c;
}

// A falling, noisy loss and a noisy gradient norm, like early training.
std::pair<double, double> healthy(std::mt19937& rng, int64_t step) {
  std::normal_distribution<double> n(0, 1);
  double loss = 2.0 + 3.0 * std::exp(-static_cast<double>(step) / 40.0) + 0.02 * n(rng);
  double gn = 1.0 + 0.1 * n(rng);
  return {loss, gn};
}

TEST(StepGuard, NonFiniteLossSkipsTheUpdate) {
  StepGuard g(FaultConfig{});
  EXPECT_EQ(g.judge(1, 5.0, 1.0).action, GuardAction::kUpdate);
  GuardVerdict v = g.judge(2, NAN, 1.0);
  EXPECT_EQ(v.action, GuardAction::kSkip);
  EXPECT_EQ(v.reason, "nan_loss");
  EXPECT_EQ(v.message, "loss is NaN at step 2");
  v = g.judge(3, 5.0, INFINITY);
  EXPECT_EQ(v.reason, "inf_grad_norm");
  EXPECT_EQ(v.message, "gradient norm is Inf at step 3");
  EXPECT_EQ(g.judge(4, 5.0, 1.0).action, GuardAction::kUpdate);
  EXPECT_EQ(g.consecutive_skips(), 0);
}

TEST(StepGuard, StopPolicyStopsAtTheFirstNonFiniteValue) {
  FaultConfig c;
  c.nan_policy = NanPolicy::kStop;
  StepGuard g(c);
  GuardVerdict v = g.judge(1, NAN, NAN);
  EXPECT_EQ(v.action, GuardAction::kStop);
  EXPECT_EQ(v.message, "loss is NaN at step 1");
}

TEST(StepGuard, TooManySkipsInARowStopNamingTheFirst) {
  FaultConfig c;
  c.max_consecutive_skips = 4;
  StepGuard g(c);
  for (int s = 1; s <= 3; ++s) EXPECT_EQ(g.judge(s, -INFINITY, 1).action, GuardAction::kSkip) << s;
  GuardVerdict v = g.judge(4, NAN, 1);
  EXPECT_EQ(v.action, GuardAction::kStop);
  EXPECT_NE(v.message.find("loss is Inf at step 1, and the 3 step(s) after it were skipped too"), std::string::npos)
      << v.message;
}

TEST(StepGuard, HealthyTrainingHasNoSpikes) {
  std::mt19937 rng(7);
  StepGuard g(small_window());
  for (int64_t s = 1; s <= 500; ++s) {
    auto [l, gn] = healthy(rng, s);
    GuardVerdict v = g.judge(s, l, gn);
    ASSERT_EQ(v.action, GuardAction::kUpdate) << "step " << s << ": " << v.message;
  }
}

TEST(StepGuard, ASpikeIsSkippedAndThreeInTheWindowRollBack) {
  std::mt19937 rng(3);
  StepGuard g(small_window());
  int64_t s = 1;
  for (; s <= 30; ++s)
    ASSERT_EQ(g.judge(s, healthy(rng, s).first, healthy(rng, s).second).action, GuardAction::kUpdate);
  GuardVerdict v = g.judge(s, 40.0, 1.0);  // loss × ~10
  EXPECT_EQ(v.action, GuardAction::kSkip);
  EXPECT_EQ(v.reason, "loss_spike");
  EXPECT_GT(v.loss_z, 6);
  EXPECT_EQ(v.spikes_in_window, 1);
  ++s;
  EXPECT_EQ(g.judge(s, healthy(rng, s).first, healthy(rng, s).second).action, GuardAction::kUpdate);
  ++s;
  v = g.judge(s, healthy(rng, s).first, 30.0);  // gradient norm × 30
  EXPECT_EQ(v.reason, "grad_norm_spike");
  EXPECT_EQ(v.action, GuardAction::kSkip);
  ++s;
  v = g.judge(s, 50.0, 50.0);
  EXPECT_EQ(v.action, GuardAction::kRollback);
  EXPECT_EQ(v.spikes_in_window, 3);
  g.rolled_back(25);
  EXPECT_EQ(g.consecutive_skips(), 0);
  // Spikes were forgotten: one more is a skip again, not a rollback.
  EXPECT_EQ(g.judge(26, 50.0, 1.0).action, GuardAction::kSkip);
}

TEST(StepGuard, SpikesOutsideTheWindowDoNotAccumulate) {
  std::mt19937 rng(5);
  FaultConfig c = small_window();
  StepGuard g(c);
  int spikes = 0;
  for (int64_t s = 1; s <= 200; ++s) {
    bool spike = s > 20 && s % 25 == 0;  // one spike every 25 steps: never 3 within 20
    auto [l, gn] = healthy(rng, s);
    GuardVerdict v = g.judge(s, spike ? l * 10 : l, gn);
    if (spike) {
      ++spikes;
      EXPECT_EQ(v.action, GuardAction::kSkip) << s;
    } else {
      EXPECT_EQ(v.action, GuardAction::kUpdate) << s;
    }
  }
  EXPECT_EQ(spikes, 8);
}

TEST(StepGuard, DetectorOffWithZeroThreshold) {
  FaultConfig c = small_window();
  c.spike_zscore = 0;
  StepGuard g(c);
  for (int64_t s = 1; s <= 30; ++s) g.judge(s, 1.0 + 0.01 * static_cast<double>(s % 3), 1.0);
  EXPECT_EQ(g.judge(31, 100.0, 100.0).action, GuardAction::kUpdate);
}

TEST(StepGuard, AConvergedFlatLossDoesNotSpikeOnAWobble) {
  StepGuard g(small_window());
  for (int64_t s = 1; s <= 30; ++s) g.judge(s, 0.01, 0.5);
  EXPECT_EQ(g.judge(31, 0.0105, 0.51).action, GuardAction::kUpdate);  // +5 %: below the 10 % floor
  EXPECT_EQ(g.judge(32, 0.05, 0.5).action, GuardAction::kSkip);       // ×5
}

// A checkpoint holds the guard's state (manifest "step_guard"): a guard restored from its JSON
// text decides every later step as the original does, to the z-score — a resume judges a spike
// right after it as an uninterrupted run does.
TEST(StepGuard, RestoredFromItsJsonTextDecidesAsTheOriginal) {
  std::mt19937 rng(11);
  StepGuard a(small_window());
  std::vector<std::pair<double, double>> xs;
  for (int64_t s = 1; s <= 60; ++s) xs.push_back(healthy(rng, s));
  xs[24] = {xs[24].first * 10, xs[24].second};  // spikes at steps 25, 27 (before the save) and 29
  xs[26] = {xs[26].first, 40.0};
  xs[28] = {xs[28].first * 10, xs[28].second};
  for (int64_t s = 1; s <= 27; ++s) a.judge(s, xs[s - 1].first, xs[s - 1].second);
  const nlohmann::json saved = nlohmann::json::parse(a.to_json().dump());  // through the manifest's text
  StepGuard b(small_window()), fresh(small_window());
  b.restore(saved, "step_00000027/manifest.json");
  EXPECT_EQ(b.history_size(), a.history_size());
  EXPECT_EQ(b.spikes_in_window(), 2u);
  EXPECT_EQ(b.to_json(), a.to_json());
  for (int64_t s = 28; s <= 60; ++s) {
    GuardVerdict va = a.judge(s, xs[s - 1].first, xs[s - 1].second);
    GuardVerdict vb = b.judge(s, xs[s - 1].first, xs[s - 1].second);
    ASSERT_EQ(va.action, vb.action) << s;
    ASSERT_EQ(va.loss_z, vb.loss_z) << s;  // bitwise: the history's doubles round-trip exactly
    ASSERT_EQ(va.message, vb.message) << s;
  }
  // The third spike in the window (step 29) rolls back; an empty guard would not even judge it.
  EXPECT_EQ(fresh.judge(29, xs[28].first, xs[28].second).action, GuardAction::kUpdate);
}

TEST(StepGuard, RestoreNamesTheBadFieldAndLeavesTheGuardAlone) {
  StepGuard g(small_window());
  g.judge(1, 3.0, 1.0);
  nlohmann::json bad = g.to_json();
  bad["history"][0] = {1, "x", 1.0};
  try {
    g.restore(bad, "step_00000001/manifest.json");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("step_00000001/manifest.json: .step_guard.history[0] must be [step, loss, "
                                         "grad_norm]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(g.history_size(), 1u);
  nlohmann::json no_spikes = g.to_json();
  no_spikes.erase("spikes");
  EXPECT_THROW(g.restore(no_spikes, "m"), Error);
}

TEST(FaultInjector, ParsesItemsAndMatchesBatchAndRank) {
  FaultInjector inj("nan@5,gradnan@7:1,spike@9*4,inf@11");
  EXPECT_FALSE(inj.at(4, 0).any());
  EXPECT_TRUE(std::isnan(inj.at(5, 0).loss_factor));
  EXPECT_TRUE(std::isnan(inj.at(5, 3).grad_factor));
  EXPECT_FALSE(inj.at(7, 0).any());
  EXPECT_TRUE(std::isnan(inj.at(7, 1).grad_factor));
  EXPECT_EQ(inj.at(7, 1).loss_factor, 1.0);
  EXPECT_EQ(inj.at(9, 2).loss_factor, 4.0);
  EXPECT_EQ(inj.at(9, 2).grad_factor, 4.0f);
  EXPECT_TRUE(std::isinf(inj.at(11, 0).loss_factor));
}

TEST(FaultInjector, BadSpecsNameTheItem) {
  for (const char* bad : {"nan", "oops@3", "nan@x", "spike@3*-1", "nan@0", "nan@3:r"}) {
    try {
      FaultInjector inj(bad);
      FAIL() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("FLUXTRAIN_FAULT_INJECT"), std::string::npos) << e.what();
    }
  }
}

TEST(FaultConfig, ValidateNamesTheKey) {
  FaultConfig c;
  c.spike_min_history = 500;
  try {
    c.validate();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fault.spike_min_history"), std::string::npos);
  }
}

}  // namespace
}  // namespace ft

// TrainingFaults (the step loop's side): a NaN and a spike appear in the Prometheus exposition
// and on the step's metrics line; a rollback is counted and recorded with its skipped window.
namespace ft {
namespace {

TEST(TrainingFaults, GuardEventsReachPrometheusAndMetricsLines) {
  FaultConfig c = small_window();
  obs::Registry reg;
  TrainingFaults f(c, std::filesystem::temp_directory_path().string(), 0, 0, 8, &reg);
  Mesh mesh = Mesh::single();
  std::mt19937 rng(11);
  int64_t s = 1;
  for (; s <= 15; ++s) {
    auto [l, gn] = healthy(rng, s);
    ASSERT_FALSE(f.judge(mesh.world(), s, l, gn, l).skipped());
  }
  GuardVerdict v = f.judge(mesh.world(), s, NAN, 1.0, NAN);
  EXPECT_EQ(v.reason, "nan_loss");
  EXPECT_NE(v.message.find("produced by rank 0"), std::string::npos) << v.message;
  nlohmann::json j;
  f.add_to_metrics(v, j);
  EXPECT_EQ(j["skipped"], true);
  EXPECT_EQ(j["guard"], "nan_loss");
  EXPECT_EQ(j["guard_ranks"], nlohmann::json::array({0}));
  v = f.judge(mesh.world(), ++s, 50.0, 1.0, 50.0);
  EXPECT_EQ(v.reason, "loss_spike");
  f.rolled_back(s, 10, 80, 136);
  nlohmann::json k;
  f.add_to_metrics(v, k);
  EXPECT_EQ(k["rollback"]["to_step"], 10);
  EXPECT_EQ(k["rollback"]["skip_samples"], nlohmann::json::array({80, 136}));
  const std::string text = reg.expose();
  EXPECT_NE(text.find("fluxtrain_guard_events_total{reason=\"nan_loss\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("fluxtrain_guard_events_total{reason=\"loss_spike\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("fluxtrain_rollbacks_total 1"), std::string::npos) << text;
}

}  // namespace
}  // namespace ft

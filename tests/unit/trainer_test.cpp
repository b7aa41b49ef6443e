#include "train/trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "config/config.h"
#include "model/activation_sizes.h"
#include "util/error.h"

namespace ft {
namespace {

Config tiny(std::vector<std::string> extra = {}) {
  std::string dir = (std::filesystem::temp_directory_path() / ("ft_trainer_" + std::to_string(::getpid()))).string();
  std::vector<std::string> sets = {"train.precision=\"fp32\"", "train.batch_size=4",
                                   "train.seq_len=16",         "train.steps=6",
                                   "train.eval_interval=0",    "train.run_dir=\"" + dir + "\""};
  sets.insert(sets.end(), extra.begin(), extra.end());
  return load_config("", sets);
}

std::vector<double> losses(const Config& c) {
  Mesh mesh = Mesh::single();
  Trainer t(c, mesh);
  std::vector<double> out;
  for (int i = 0; i < c.train.steps; ++i) out.push_back(t.step().loss);
  return out;
}

TEST(Trainer, SameSeedGivesBitIdenticalLosses) {
  auto a = losses(tiny()), b = losses(tiny());
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "step " << i + 1;
  auto c = losses(tiny({"train.seed=99"}));
  EXPECT_NE(a[0], c[0]);
}

// Losses and gradient norms (before clipping) of every step.
std::vector<std::pair<double, double>> losses_and_norms(const Config& c) {
  Mesh mesh = Mesh::single();
  Trainer t(c, mesh);
  std::vector<std::pair<double, double>> out;
  for (int i = 0; i < c.train.steps; ++i) {
    StepStats s = t.step();
    out.push_back({s.loss, s.grad_norm});
  }
  return out;
}

// Recompute re-runs the forward's own ops on the same inputs: bit-identical losses and gradient
// norms to keeping everything, in fp32 and bf16, with two micro-batches a step.
TEST(Trainer, RecomputeGivesTheSameLossesAndGradNorms) {
  for (const char* precision : {"train.precision=\"fp32\"", "train.precision=\"bf16\""}) {
    const std::vector<std::string> base = {precision, "train.micro_batch_size=2", "train.steps=4"};
    auto with = [&](const char* recompute) {
      std::vector<std::string> sets = base;
      sets.push_back(std::string("model.recompute=\"") + recompute + "\"");
      return losses_and_norms(tiny(sets));
    };
    auto none = with("none");
    for (const char* mode : {"selective", "full"}) {
      auto r = with(mode);
      ASSERT_EQ(r.size(), none.size());
      for (size_t i = 0; i < r.size(); ++i) {
        EXPECT_EQ(r[i].first, none[i].first) << precision << " " << mode << " step " << i + 1 << " loss";
        EXPECT_EQ(r[i].second, none[i].second) << precision << " " << mode << " step " << i + 1 << " grad norm";
      }
    }
  }
}

TEST(Trainer, UnknownRecomputeModeIsAnError) {
  try {
    tiny({"model.recompute=\"attention\""});
    FAIL() << "model.recompute = \"attention\" was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.recompute"), std::string::npos) << e.what();
  }
}

TEST(Trainer, MicroBatchesMatchOneBatch) {
  auto a = losses(tiny()), b = losses(tiny({"train.micro_batch_size=1"}));
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5 * a[i]) << "step " << i + 1;
}

TEST(Trainer, LossFallsOnTheSyntheticTask) {
  auto l = losses(
      tiny({"train.steps=40", "optim.lr=1e-2", "optim.warmup_steps=5", "train.batch_size=8", "train.seq_len=32"}));
  EXPECT_LT(l.back(), l.front() - 1.0);
}

TEST(Trainer, NanLossStopsNamingTheStep) {  // fault.nan_policy = "stop"
  try {
    Mesh mesh = Mesh::single();
    Trainer t(tiny({"model.init_std=1e30", "fault.nan_policy=\"stop\""}), mesh);
    t.step();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("loss is NaN at step 1"), std::string::npos) << e.what();
  }
}

TEST(Trainer, NanLossSkipsUpdatesThenStopsAfterTooMany) {  // the default, fault.nan_policy = "skip"
  Mesh mesh = Mesh::single();
  Trainer t(tiny({"model.init_std=1e30", "fault.max_consecutive_skips=3"}), mesh);
  EXPECT_TRUE(t.step().guard.skipped());
  EXPECT_TRUE(t.step().guard.skipped());
  try {
    t.step();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("loss is NaN at step 1, and the 2 step(s) after it were skipped too"),
              std::string::npos)
        << e.what();
  }
}

// An injected NaN (FLUXTRAIN_FAULT_INJECT) skips exactly that update: the weights after the
// skipped step are the weights before it, and training goes on.
TEST(Trainer, InjectedNanSkipsExactlyThatUpdate) {
  ::setenv("FLUXTRAIN_FAULT_INJECT", "nan@3", 1);
  Mesh mesh = Mesh::single();
  Trainer t(tiny(), mesh);
  ::unsetenv("FLUXTRAIN_FAULT_INJECT");
  std::vector<float> before(static_cast<size_t>(t.params().layout().total())), after(before.size());
  t.step();
  t.step();
  t.params().gather_weights(before.data());
  StepStats s = t.step();
  EXPECT_TRUE(s.guard.skipped());
  EXPECT_EQ(s.guard.reason, "nan_loss");
  t.params().gather_weights(after.data());
  EXPECT_EQ(before, after);
  StepStats next = t.step();
  EXPECT_FALSE(next.guard.skipped());
  EXPECT_TRUE(std::isfinite(next.loss));
  t.params().gather_weights(after.data());
  EXPECT_NE(before, after);
}

// An injected loss spike (loss and gradients × 50 on the step-9 batch) is skipped by the spike
// detector, and no other step is.
TEST(Trainer, AnInjectedSpikeIsSkippedBySpikeDetection) {
  ::setenv("FLUXTRAIN_FAULT_INJECT", "spike@9*50", 1);
  Mesh mesh = Mesh::single();
  Trainer t(tiny({"train.steps=12", "fault.spike_min_history=5", "fault.spike_window=10"}), mesh);
  ::unsetenv("FLUXTRAIN_FAULT_INJECT");
  for (int i = 1; i <= 12; ++i) {
    StepStats s = t.step();
    EXPECT_EQ(s.guard.skipped(), i == 9) << "step " << i << ": " << s.guard.message;
    if (i == 9) {
      EXPECT_EQ(s.guard.reason, "loss_spike");
    }
  }
}

TEST(Trainer, ActivationAccountingMatchesTheAllocator) {
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    Config c = tiny();
    c.model.recompute = r;
    int64_t before = MemoryTracker::global().live(MemCategory::kActivations);
    Activations acts;
    acts.allocate(c.model, 4, 16, 32);
    EXPECT_EQ(MemoryTracker::global().live(MemCategory::kActivations) - before,
              kept_activation_bytes(c.model, 4, 16, 32, r))
        << recompute_name(r);
  }
}

}  // namespace
}  // namespace ft

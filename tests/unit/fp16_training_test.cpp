// fp16 compute: GEMM operands rounded to fp16 with fp32 master weights and gradients, and the
// dynamic loss scaler — the backward runs on loss × scale, an overflow skips exactly that update
// and halves the scale, clean steps grow it, and a checkpoint keeps it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "config/config.h"
#include "train/trainer.h"

namespace ft {
namespace {

std::string run_dir(const std::string& tag) {
  return (std::filesystem::temp_directory_path() / ("ft_fp16_" + tag + "_" + std::to_string(::getpid()))).string();
}

Config tiny(const std::string& precision, std::vector<std::string> extra = {}) {
  std::vector<std::string> sets = {"train.batch_size=8",
                                   "train.seq_len=32",
                                   "train.steps=50",
                                   "train.eval_interval=0",
                                   "train.precision=\"" + precision + "\"",
                                   "train.run_dir=\"" + run_dir(precision) + "\""};
  sets.insert(sets.end(), extra.begin(), extra.end());
  return load_config("", sets);
}

TEST(Fp16Training, FiftyStepsFollowTheFp32LossTrajectory) {
  Config c16 = tiny("fp16"), c32 = tiny("fp32");
  ASSERT_EQ(c16.train.precision, Precision::kF16);
  Mesh m1 = Mesh::single(), m2 = Mesh::single();
  Trainer t16(c16, m1), t32(c32, m2);
  double worst = 0;
  for (int i = 1; i <= 50; ++i) {
    StepStats a = t16.step(), b = t32.step();
    ASSERT_FALSE(a.guard.skipped()) << "step " << i << ": " << a.guard.message;
    EXPECT_EQ(a.loss_scale, 65536.0) << "step " << i;  // no overflow, no growth within the window
    EXPECT_EQ(b.loss_scale, 0.0);
    const double rel = std::fabs(a.loss - b.loss) / b.loss;
    worst = std::max(worst, rel);
    EXPECT_LT(rel, 0.02) << "step " << i << ": fp16 " << a.loss << " vs fp32 " << b.loss;
    // The scale is divided out: the gradient norm is the fp32 one's, not 65536 times it.
    EXPECT_NEAR(a.grad_norm, b.grad_norm, 0.05 * b.grad_norm + 1e-6) << "step " << i;
  }
  std::printf("fp16 vs fp32, 50 steps of tiny: worst relative loss difference %.3e\n", worst);
  // fp16 really rounds: the trajectories are close, not equal.
  EXPECT_GT(worst, 0.0);
}

TEST(Fp16Training, AnOverflowSkipsExactlyThatUpdateAndHalvesTheScale) {
  ::setenv("FLUXTRAIN_FAULT_INJECT", "gradinf@4", 1);
  Mesh mesh = Mesh::single();
  Trainer t(tiny("fp16", {"train.steps=8"}), mesh);
  ::unsetenv("FLUXTRAIN_FAULT_INJECT");
  std::vector<float> before(static_cast<size_t>(t.params().layout().total())), after(before.size());
  for (int i = 1; i <= 8; ++i) {
    if (i == 4) t.params().gather_weights(before.data());
    StepStats s = t.step();
    EXPECT_EQ(s.guard.skipped(), i == 4) << "step " << i << ": " << s.guard.message;
    EXPECT_TRUE(std::isfinite(s.loss)) << "step " << i;
    // Steps 1-4 ran their backward at 65536; after the overflow at step 4, at 32768.
    EXPECT_EQ(s.loss_scale, i <= 4 ? 65536.0 : 32768.0) << "step " << i;
    if (i == 4) {
      EXPECT_EQ(s.guard.reason, "fp16_overflow");
      t.params().gather_weights(after.data());
      EXPECT_EQ(before, after) << "the overflowed update must not touch the weights";
    }
  }
}

TEST(Fp16Training, CleanStepsGrowTheScaleAfterTheWindow) {
  Mesh mesh = Mesh::single();
  Trainer t(tiny("fp16", {"train.steps=7", "optim.loss_scale_window=3", "optim.loss_scale_init=1024"}), mesh);
  std::vector<double> scales;
  for (int i = 0; i < 7; ++i) scales.push_back(t.step().loss_scale);
  EXPECT_EQ(scales, (std::vector<double>{1024, 1024, 1024, 2048, 2048, 2048, 4096}));
}

TEST(Fp16Training, OtherPrecisionsUseNoScale) {
  Mesh mesh = Mesh::single();
  Trainer t(tiny("bf16", {"train.steps=1"}), mesh);
  EXPECT_EQ(t.step().loss_scale, 0.0);
}

TEST(Fp16Training, BadScalerSettingsAreRefusedNamingTheKey) {
  try {
    load_config("", {"optim.loss_scale_window=0"});
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("optim.loss_scale_window"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_config("", {"optim.loss_scale_init=0.5"}), Error);
}

}  // namespace
}  // namespace ft

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "optim/grad_clip.h"
#include "optim/loss_scaler.h"
#include "optim/lr_schedule.h"

namespace ft {
namespace {

TEST(LrSchedule, WarmupThenCosineToMin) {
  OptimConfig o;
  o.lr = 1.0;
  o.min_lr_ratio = 0.1;
  o.warmup_steps = 4;
  LrSchedule s(o, 14);  // 4 warm-up + 10 decay
  EXPECT_DOUBLE_EQ(s.at(0), 0.25);
  EXPECT_DOUBLE_EQ(s.at(3), 1.0);
  EXPECT_DOUBLE_EQ(s.at(4), 1.0);
  EXPECT_NEAR(s.at(9), 0.55, 1e-12);  // halfway: min + (max - min) / 2
  EXPECT_NEAR(s.at(14), 0.1, 1e-12);
  EXPECT_NEAR(s.at(100), 0.1, 1e-12);
  for (int i = 4; i < 14; ++i) EXPECT_GE(s.at(i), s.at(i + 1));
}

TEST(GradClip, MatchesTorchFormula) {
  EXPECT_FLOAT_EQ(clip_coefficient(0.5, 1.0), 1.0f);
  EXPECT_FLOAT_EQ(clip_coefficient(4.0, 1.0), static_cast<float>(1.0 / (4.0 + 1e-6)));
  EXPECT_FLOAT_EQ(clip_coefficient(4.0, 0.0), 1.0f);
  float g[3] = {3, 4, 12};
  EXPECT_DOUBLE_EQ(grad_sum_squares(cpu_context(), g, 3), 169.0);
}

TEST(LossScaler, BacksOffAndSkipsOnOverflow) {
  LossScaler s(1024.0, 2.0, 0.5, 3);
  EXPECT_FALSE(s.update(true));
  EXPECT_DOUBLE_EQ(s.scale(), 512.0);
  EXPECT_EQ(s.skipped_steps(), 1);
  EXPECT_TRUE(s.update(false));
  EXPECT_TRUE(s.update(false));
  EXPECT_DOUBLE_EQ(s.scale(), 512.0);
  EXPECT_TRUE(s.update(false));  // third clean step in a row: grow
  EXPECT_DOUBLE_EQ(s.scale(), 1024.0);
  EXPECT_FALSE(s.update(true));  // overflow resets the clean-step count
  EXPECT_TRUE(s.update(false));
  EXPECT_TRUE(s.update(false));
  EXPECT_DOUBLE_EQ(s.scale(), 512.0);
}

TEST(LossScaler, RespectsBounds) {
  LossScaler s(2.0, 2.0, 0.5, 1, /*min=*/1.0, /*max=*/4.0);
  s.update(true);
  s.update(true);
  s.update(true);
  EXPECT_DOUBLE_EQ(s.scale(), 1.0);
  for (int i = 0; i < 5; ++i) s.update(false);
  EXPECT_DOUBLE_EQ(s.scale(), 4.0);
}

TEST(LossScaler, FindsInfAndNan) {
  std::vector<float> x(1000, 1.0f);
  EXPECT_FALSE(has_inf_or_nan(x.data(), 1000));
  x[777] = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(has_inf_or_nan(x.data(), 1000));
  x[777] = std::nanf("");
  EXPECT_TRUE(has_inf_or_nan(x.data(), 1000));
}

}  // namespace
}  // namespace ft

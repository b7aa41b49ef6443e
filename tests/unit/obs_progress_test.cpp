#include <gtest/gtest.h>

#include "obs/progress.h"

namespace ft::obs {
namespace {

TEST(ProgressLine, FormatsWhatAPersonNeeds) {
  ProgressStats s{.step = 120, .loss = 3.21449, .tokens_per_s = 12345, .mfu = 0.4123, .step_s = 0.21};
  std::string l = ProgressLine::format(s, 1000, 185);
  EXPECT_EQ(l, "step 120/1000 | loss 3.2145 | 12.3k tok/s | MFU 41.2% | 0.21 s/step | ETA 3m05s");
  // Unknowns are left out rather than printed as nan.
  ProgressStats u{.step = 3, .loss = 5.0};
  EXPECT_EQ(ProgressLine::format(u, 0, -1), "step 3 | loss 5.0000 | ? tok/s");
  ProgressStats w{.step = 3, .loss = 5.0, .tokens_per_s = 2.5e6, .lr = 3e-4, .grad_norm = 0.8125};
  EXPECT_EQ(ProgressLine::format(w, 10, 7.5),
            "step 3/10 | loss 5.0000 | lr 3.00e-04 | grad norm 0.812 | 2.50M tok/s | ETA 7.5s");
}

TEST(ProgressLine, EtaFollowsTheStepTime) {
  ProgressLine p(100, 10, ProgressLine::Mode::kPlain);
  testing::internal::CaptureStderr();
  for (int s = 1; s <= 50; ++s) p.update({.step = s, .loss = 1, .tokens_per_s = 1, .step_s = 2.0});
  testing::internal::GetCapturedStderr();
  EXPECT_NEAR(p.eta_seconds(), 50 * 2.0, 1e-9);
}

TEST(ProgressLine, PlainModeLogsEveryIntervalAndTheLastStep) {
  ProgressLine p(25, 10, ProgressLine::Mode::kPlain);
  EXPECT_FALSE(p.live());
  testing::internal::CaptureStderr();
  for (int s = 1; s <= 25; ++s) p.update({.step = s, .loss = 1, .tokens_per_s = 100, .step_s = 0.1});
  p.finish();
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 4) << err;  // steps 1, 10, 20, 25
  EXPECT_NE(err.find("step 10/25"), std::string::npos);
  EXPECT_NE(err.find("step 25/25"), std::string::npos);
  EXPECT_EQ(err.find('\r'), std::string::npos);  // no terminal control in a log file
}

TEST(ProgressLine, LiveModeRedrawsInPlace) {
  ProgressLine p(3, 1, ProgressLine::Mode::kLive);
  testing::internal::CaptureStderr();
  p.update({.step = 1, .loss = 2, .tokens_per_s = 10, .step_s = 1});
  p.update({.step = 3, .loss = 1, .tokens_per_s = 10, .step_s = 1});  // the last step is always drawn
  p.finish();
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.rfind("\r\x1b[Kstep 1/3", 0), 0u) << err;
  EXPECT_NE(err.find("\r\x1b[Kstep 3/3 | loss 1.0000"), std::string::npos) << err;
  EXPECT_EQ(err.back(), '\n');  // the last line stays on screen
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1);
}

}  // namespace
}  // namespace ft::obs

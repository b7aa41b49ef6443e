// Goodput (plan/goodput.h) by hand from Llama 3's published failure count (Dubey et al. 2024,
// Sec. 3.3.4: 419 unexpected interruptions in 54 days on 16,384 GPUs).
#include <gtest/gtest.h>

#include "plan/goodput.h"
#include "util/error.h"

namespace ft::plan {
namespace {

TEST(PlanGoodput, LlamaThreeByHand) {
  Resilience r;
  r.restart_s = 600;         // 10 minutes
  r.ckpt_interval_s = 3600;  // hourly: 30 minutes of lost work on average
  const Goodput g = expected_goodput(16384, r);
  EXPECT_NEAR(g.interruptions_per_day, 419.0 / 54.0, 1e-9);  // 7.76 a day, as published
  EXPECT_DOUBLE_EQ(g.lost_s_per_interruption, 2400.0);
  // 7.76 × 40 min = 310 min lost per 1440 min of training: 1440 / (1440 + 310.4) = 0.8227.
  EXPECT_NEAR(g.goodput, 1440.0 / (1440.0 + 419.0 / 54.0 * 40.0), 1e-12);
  EXPECT_NEAR(g.goodput, 0.8227, 1e-4);
  // 128 GPUs: 0.06 a day, goodput 99.8%.
  EXPECT_NEAR(expected_goodput(128, r).goodput, 0.998, 1e-3);
  r.failures_per_gpu_day = 0;
  EXPECT_DOUBLE_EQ(expected_goodput(16384, r).goodput, 1.0);
}

TEST(PlanGoodput, BadInputsNameTheValue) {
  Resilience r;
  r.ckpt_interval_s = 0;
  EXPECT_THROW(expected_goodput(8, r), Error);
  r = Resilience{};
  r.restart_s = -1;
  try {
    expected_goodput(8, r);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("restart time = -1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ft::plan

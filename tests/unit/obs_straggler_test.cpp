// Straggler detection (obs/straggler.h) on made-up step times whose
// right answers follow from the definitions.
#include <gtest/gtest.h>

#include "obs/straggler.h"

namespace ft::obs {
namespace {

TEST(Straggler, ASlowRankIsNamedAfterMinSlowStepsWithItsCost) {
  StragglerDetector d({"h0", "h1", "h2", "h3"}, {.factor = 1.25, .window = 5, .min_slow = 3});
  // Steps 1-2 healthy; from step 3 rank 2 computes 2 s against the others' ~1 s.
  std::vector<std::vector<double>> steps = {{1.0, 1.1, 1.0, 0.9},  {1.0, 1.0, 1.05, 1.0}, {1.0, 1.1, 2.0, 1.0},
                                            {1.0, 1.0, 2.0, 0.95}, {1.05, 1.0, 2.2, 1.0}, {1.0, 1.0, 2.0, 1.0}};
  std::vector<StragglerReport> r;
  for (size_t i = 0; i < steps.size(); ++i) r.push_back(d.observe(static_cast<int64_t>(i + 1), steps[i]));
  EXPECT_TRUE(r[3].current.empty());   // two slow steps of five: not yet
  ASSERT_EQ(r[4].started.size(), 1u);  // the third slow step names it
  const Straggler& s = r[4].started[0];
  EXPECT_EQ(s.rank, 2);
  EXPECT_EQ(s.host, "h2");
  EXPECT_EQ(s.since_step, 5);
  EXPECT_NEAR(s.cost_s, 2.2 - 1.05, 1e-12);  // against the slowest healthy rank of the step
  EXPECT_NEAR(s.slowdown, 2.0, 0.1);         // median of 2.0/1.0, 2.0/1.0, 2.2/1.025
  ASSERT_EQ(r[5].current.size(), 1u);
  EXPECT_TRUE(r[5].started.empty());
  EXPECT_NEAR(r[5].current[0].cost_total_s, (2.2 - 1.05) + (2.0 - 1.0), 1e-12);
  EXPECT_NEAR(d.total_cost_s(), (2.2 - 1.05) + (2.0 - 1.0), 1e-12);
}

TEST(Straggler, RecoversAndNoiseBelowTheFactorIsNobody) {
  StragglerDetector d({"a", "b"}, {.factor = 1.25, .window = 3, .min_slow = 2});
  // With two ranks the median is their mean: 1.0 vs 2.0 -> 2.0 / 1.5 = 1.33 > 1.25.
  d.observe(1, {1.0, 2.0});
  StragglerReport named = d.observe(2, {1.0, 2.0});
  ASSERT_EQ(named.started.size(), 1u);
  EXPECT_EQ(named.started[0].rank, 1);
  d.observe(3, {1.0, 1.1});
  StragglerReport back = d.observe(4, {1.0, 1.1});  // slow in 1 of the last 3
  ASSERT_EQ(back.recovered.size(), 1u);
  EXPECT_EQ(back.recovered[0].rank, 1);
  EXPECT_TRUE(back.current.empty());
  StragglerDetector quiet({"a", "b", "c"}, {.factor = 1.25, .window = 3, .min_slow = 1});
  for (int i = 1; i <= 5; ++i) EXPECT_TRUE(quiet.observe(i, {1.0, 1.2, 0.9}).current.empty());
  // Microsecond steps: 3x the median but only 2 us more is not judged.
  for (int i = 1; i <= 5; ++i) EXPECT_TRUE(quiet.observe(i, {1e-6, 3e-6, 1e-6}).current.empty());
}

}  // namespace
}  // namespace ft::obs

// Pipeline schedules as data: generated tables are consistent (simulate() checks every send
// against its receive, deadlock freedom and in-flight bounds), their simulated bubble is the
// textbook fraction, and broken tables are rejected with the stage and action named.
#include <gtest/gtest.h>

#include <algorithm>

#include "parallel/pipeline_parallel/schedule_sim.h"
#include "util/error.h"

namespace ft {
namespace {

constexpr auto kGPipe = PipelineSchedule::kGPipe;
constexpr auto k1F1B = PipelineSchedule::k1F1B;
constexpr auto kInterleaved = PipelineSchedule::kInterleaved;

std::string error_of(const Schedule& s) {
  try {
    simulate(s);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Schedule, OneFOneBAndGPipeBubbleIsPMinusOneOverMPlusPMinusOne) {
  for (auto kind : {kGPipe, k1F1B})
    for (int p = 1; p <= 8; ++p)
      for (int m = 1; m <= 16; ++m)
        for (double backward : {1.0, 2.0}) {
          Schedule s = make_schedule(kind, p, m, 1);
          ScheduleReport r = simulate(s, {1.0, backward});
          double theory = static_cast<double>(p - 1) / (m + p - 1);
          EXPECT_NEAR(r.bubble, theory, 1e-12) << s.describe() << " backward cost " << backward;
          EXPECT_NEAR(r.bubble, theoretical_bubble(kind, p, m, 1), 1e-12);
          EXPECT_DOUBLE_EQ(r.makespan, (m + p - 1) * (1 + backward)) << s.describe();
        }
}

TEST(Schedule, InterleavedBubbleIsPMinusOneOverVMPlusPMinusOne) {
  // Each (micro-batch, chunk) costs one unit: a stage's work is 2·v·m units and the ramp-up and
  // ramp-down add 2(p − 1), so idle / total = (p − 1) / (v·m + p − 1).
  for (int p = 2; p <= 8; ++p)
    for (int v = 2; v <= 4; ++v)
      for (int m = p; m <= 4 * p; m += p)
        for (double backward : {1.0, 2.0}) {
          Schedule s = make_schedule(kInterleaved, p, m, v);
          ScheduleReport r = simulate(s, {1.0, backward});
          double theory = static_cast<double>(p - 1) / (v * m + p - 1);
          EXPECT_NEAR(r.bubble, theory, 1e-12) << s.describe() << " backward cost " << backward;
          EXPECT_NEAR(r.bubble, theoretical_bubble(kInterleaved, p, m, v), 1e-12);
        }
  // Interleaving shrinks the bubble against 1F1B on the same stages and micro-batches.
  EXPECT_LT(simulate(make_schedule(kInterleaved, 4, 8, 2)).bubble, simulate(make_schedule(k1F1B, 4, 8, 1)).bubble);
}

TEST(Schedule, InFlightMicroBatchesAreBounded) {
  for (int p = 1; p <= 8; ++p)
    for (int m = 1; m <= 12; ++m) {
      ScheduleReport one = simulate(make_schedule(k1F1B, p, m, 1));
      ScheduleReport all = simulate(make_schedule(kGPipe, p, m, 1));
      ScheduleReport fwd = simulate(make_forward_schedule(k1F1B, p, m, 1));
      for (int s = 0; s < p; ++s) {
        EXPECT_EQ(one.max_in_flight[static_cast<size_t>(s)], std::min(m, p - s)) << "1f1b p " << p << " m " << m;
        EXPECT_EQ(all.max_in_flight[static_cast<size_t>(s)], m);
        EXPECT_EQ(fwd.max_in_flight[static_cast<size_t>(s)], 1);
      }
    }
  // Interleaved: stage s holds its warm-up forwards plus one, 2(p−1−s) + (v−1)p + 1 chunk sets.
  ScheduleReport r = simulate(make_schedule(kInterleaved, 4, 8, 2));
  EXPECT_EQ(r.max_in_flight, (std::vector<int>{11, 9, 7, 5}));
}

TEST(Schedule, EveryStageComputesEachMicroBatchOnItsChunks) {
  Schedule s = make_schedule(kInterleaved, 3, 6, 2);
  for (int st = 0; st < 3; ++st) {
    int forwards = 0, backwards = 0;
    for (const PipelineAction& a : s.actions[static_cast<size_t>(st)]) {
      EXPECT_EQ(s.stage_of(a.chunk), st);
      forwards += a.kind == PipelineActionKind::kForward;
      backwards += a.kind == PipelineActionKind::kBackward;
    }
    EXPECT_EQ(forwards, 12);
    EXPECT_EQ(backwards, 12);
  }
}

TEST(Schedule, TimelineOfTwoStagesByHand) {
  // Stage 0: F0 at 0, F1 at 1; stage 1: F0 at 1, B0 at 2; stage 0: B0 at 3; stage 1: F1 at 3
  // (after stage 0's F1), B1 at 4; stage 0: B1 at 5.
  Schedule s = make_schedule(k1F1B, 2, 2, 1);
  ScheduleReport r = simulate(s);
  EXPECT_EQ(timeline(s, r),
            "1f1b, 2 stage(s), 2 micro-batch(es) — one column per time unit\n"
            "stage  0 | F0 F1 .  B0 .  B1 | idle 2\n"
            "stage  1 | .  F0 B0 F1 B1 .  | idle 2\n");
  EXPECT_NEAR(r.bubble, 1.0 / 3.0, 1e-12);
}

TEST(Schedule, PerChunkCostsTimeTheSameTable) {
  // Stage 0: F [0,1]; stage 1: F [1,4], B [4,5]; stage 0: B [5,7]. Busy 3 + 4 of 2 × 7.
  SimCosts c;
  c.chunk_forward = {1, 3};
  c.chunk_backward = {2, 1};
  ScheduleReport r = simulate(make_schedule(k1F1B, 2, 1, 1), c);
  EXPECT_DOUBLE_EQ(r.makespan, 7);
  EXPECT_DOUBLE_EQ(r.bubble, 0.5);
}

TEST(Schedule, DeadlockIsReportedWithWhereEachStageWaits) {
  // Stage 0 sends its activation only after its backward, which needs stage 1's gradient,
  // which needs that activation.
  Schedule s = make_schedule(k1F1B, 2, 1, 1);
  s.actions[0] = {{PipelineActionKind::kForward, 0, 0},
                  {PipelineActionKind::kRecvGrad, 0, 0},
                  {PipelineActionKind::kBackward, 0, 0},
                  {PipelineActionKind::kSendActivation, 0, 0}};
  std::string e = error_of(s);
  EXPECT_NE(e.find("deadlocks"), std::string::npos) << e;
  EXPECT_NE(e.find("stage 0 waits at backward(mb 0, chunk 0)"), std::string::npos) << e;
  EXPECT_NE(e.find("stage 1 waits at forward(mb 0, chunk 1)"), std::string::npos) << e;
}

TEST(Schedule, ReceivesOutOfOrderAreRejected) {
  // Stage 1 posts the receive of micro-batch 1 first: MPI would hand it micro-batch 0's data.
  Schedule s = make_schedule(kGPipe, 2, 2, 1);
  auto& st1 = s.actions[1];  // [recv 0, F0, recv 1, F1, ...] -> [recv 1, recv 0, F0, F1, ...]
  ASSERT_EQ(st1[2], (PipelineAction{PipelineActionKind::kRecvActivation, 1, 1}));
  st1[0] = {PipelineActionKind::kRecvActivation, 1, 1};
  st1[1] = {PipelineActionKind::kRecvActivation, 0, 1};
  st1[2] = {PipelineActionKind::kForward, 0, 1};
  std::string e = error_of(s);
  EXPECT_NE(e.find("matched in order"), std::string::npos) << e;
}

TEST(Schedule, MissingReceiveAndUnmatchedSendAreRejected) {
  Schedule s = make_schedule(k1F1B, 2, 2, 1);
  auto& st1 = s.actions[1];
  st1.erase(std::find(st1.begin(), st1.end(), PipelineAction{PipelineActionKind::kRecvActivation, 1, 1}));
  std::string e = error_of(s);
  EXPECT_NE(e.find("never received"), std::string::npos) << e;

  Schedule t = make_schedule(k1F1B, 2, 2, 1);
  t.actions[0].push_back({PipelineActionKind::kSendActivation, 1, 0});  // a second send of micro-batch 1
  e = error_of(t);
  EXPECT_NE(e.find("sent twice"), std::string::npos) << e;
}

TEST(Schedule, InFlightBoundIsEnforced) {
  Schedule s = make_schedule(kGPipe, 2, 4, 1);
  s.in_flight_bound[0] = 2;
  std::string e = error_of(s);
  EXPECT_NE(e.find("3 activation sets in flight, more than the bound 2"), std::string::npos) << e;
}

TEST(Schedule, BadArgumentsGiveClearErrors) {
  EXPECT_THROW(make_schedule(kInterleaved, 4, 6, 2), Error);  // 6 micro-batches, groups of 4
  EXPECT_THROW(make_schedule(kInterleaved, 4, 8, 1), Error);  // interleaving needs 2+ chunks
  EXPECT_THROW(make_schedule(k1F1B, 4, 8, 2), Error);         // virtual stages need interleaving
  EXPECT_THROW(make_schedule(k1F1B, 0, 8, 1), Error);
  try {
    make_schedule(kInterleaved, 4, 6, 2);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("6 micro-batches are not a multiple of 4 stages"), std::string::npos);
  }
}

}  // namespace
}  // namespace ft

// The dry run traces one rank per pipeline stage (dryrun/step_trace.h) and replays its collectives
// for every rank of the stage (dryrun/dry_run.cpp). That rests on an assumption checked here: the
// ranks of a stage (every dp and tp index) make the same calls, argument for argument. Small
// layouts of the tiny model, every rank traced; and a replayed call sends what the live call sent.
#include <gtest/gtest.h>

#include "config/config.h"
#include "dryrun/dry_run.h"
#include "dryrun/fake_comm.h"
#include "dryrun/step_trace.h"
#include "util/error.h"

namespace ft {
namespace {

Config tiny(std::vector<std::string> sets) {
  sets.push_back("train.batch_size=8");
  sets.push_back("train.micro_batch_size=2");
  return load_config(std::string(FT_SOURCE_DIR) + "/configs/tiny.toml", sets);
}

TEST(DryRunTraceReplay, EveryRankOfAStageMakesTheSameCalls) {
  const std::vector<std::vector<std::string>> layouts = {
      {"parallel.dp=2", "parallel.tp=2", "parallel.pp=2"},
      {"parallel.dp=2", "parallel.tp=2", "parallel.zero=3", "parallel.sequence_parallel=true",
       "train.precision=\"bf16\""},
      {"parallel.tp=4", "parallel.zero=2"},  // replicated kv heads
      {"parallel.dp=2", "parallel.pp=2", "parallel.zero=1", "model.recompute=\"full\""},
  };
  for (const auto& sets : layouts) {
    const Config cfg = tiny(sets);
    const ParallelConfig& p = cfg.parallel;
    for (int64_t stage = 0; stage < p.pp; ++stage) {
      const int rep = static_cast<int>(stage * p.dp * p.tp);
      const plan::OpTrace first = trace_training_step(cfg, {.world_rank = rep, .ops = false});
      EXPECT_FALSE(first.collectives.empty());
      for (int r = rep + 1; r < rep + p.dp * p.tp; ++r)
        EXPECT_EQ(trace_training_step(cfg, {.world_rank = r, .ops = false}).collectives, first.collectives)
            << "rank " << r << " of " << cfg.parallel.world_size() << ", " << sets.front();
    }
  }
}

TEST(DryRunTraceReplay, AReplayedCallSendsWhatTheLiveCallSent) {
  // An all-reduce of 10 floats over 3 ranks: uneven ring chunks (3, 3, 4), so each rank sends its own count.
  for (int i = 0; i < 3; ++i) {
    FakeCommunicator c("dp", {0, 1, 2}, i);
    std::vector<plan::CollRecord> log;
    c.set_log(&log);
    c.all_reduce(static_cast<float*>(nullptr), 10);
    c.broadcast(nullptr, 16, 0);
    ASSERT_EQ(log.size(), 2u);
    const CommStats s = c.stats();
    EXPECT_EQ(FakeCommunicator::bytes_sent(log[0], i, 3), s.bytes_sent[static_cast<size_t>(CollKind::kAllReduce)]);
    EXPECT_EQ(FakeCommunicator::bytes_sent(log[1], i, 3), s.bytes_sent[static_cast<size_t>(CollKind::kBroadcast)]);
  }
  // 2n minus the rank's own chunk and the next one's, × 4 bytes.
  FakeCommunicator c0("dp", {0, 1, 2}, 0);
  EXPECT_EQ(FakeCommunicator::bytes_sent({.group = "dp", .count = 10}, 0, 3), (20 - 3 - 3) * 4);
  EXPECT_EQ(FakeCommunicator::bytes_sent({.group = "dp", .count = 10}, 1, 3), (20 - 3 - 4) * 4);
}

// Defect 13 of issue 30: a world the dry run cannot summarise is refused at once.
TEST(DryRunTraceReplay, AHugeWorldIsRefused) {
  Config cfg = load_config(std::string(FT_SOURCE_DIR) + "/configs/tiny.toml",
                           {"parallel.dp=1000000", "train.batch_size=1000000", "train.micro_batch_size=1"});
  try {
    dry_run(cfg, 1000000, plan::find_gpu("a100-80gb"));
    FAIL() << "planned a million ranks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at most 65536"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ft

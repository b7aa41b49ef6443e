// BatchPrefetcher: batches in sample order from the background thread, built inline at depth 0,
// never more than `depth` ahead, restarted at another sample, and a failed build reported to the
// consumer as an error naming the source.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "data/loader/batch_prefetcher.h"
#include "util/error.h"

namespace ft {
namespace {

// A batch whose one token is the sample it starts at.
Batch batch_at(int64_t sample) {
  Batch b;
  b.batch = 1;
  b.seq_len = 0;
  b.tokens = {static_cast<int32_t>(sample)};
  return b;
}

TEST(BatchPrefetcher, GivesTheBatchesInSampleOrder) {
  BatchPrefetcher pf(3, 8, batch_at, "test");
  pf.start(16);
  for (int64_t s = 16; s < 16 + 8 * 20; s += 8) EXPECT_EQ(pf.take(s).batch.tokens[0], s);
}

TEST(BatchPrefetcher, DepthZeroBuildsOnTheCallersThread) {
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id built_on;
  BatchPrefetcher pf(
      0, 4,
      [&](int64_t s) {
        built_on = std::this_thread::get_id();
        return batch_at(s);
      },
      "test");
  pf.start(0);
  BatchPrefetcher::Taken t = pf.take(4);
  EXPECT_EQ(t.batch.tokens[0], 4);
  EXPECT_EQ(t.wait_s, 0.0);
  EXPECT_EQ(built_on, caller);
}

TEST(BatchPrefetcher, BuildsAtMostDepthAhead) {
  std::atomic<int> built{0};
  BatchPrefetcher pf(
      2, 1,
      [&](int64_t s) {
        ++built;
        return batch_at(s);
      },
      "test");
  pf.start(0);
  for (int i = 0; i < 2000 && built < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // time to build a third, if it would
  EXPECT_EQ(built.load(), 2);
  pf.take(0);
  for (int i = 0; i < 2000 && built < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(built.load(), 3);
}

TEST(BatchPrefetcher, RestartsAtAnotherSample) {
  BatchPrefetcher pf(2, 10, batch_at, "test");
  pf.start(0);
  EXPECT_EQ(pf.take(0).batch.tokens[0], 0);
  pf.stop();
  pf.start(100);  // a restore: the batches built ahead of the old position are dropped
  EXPECT_EQ(pf.take(100).batch.tokens[0], 100);
  EXPECT_EQ(pf.take(110).batch.tokens[0], 110);
}

TEST(BatchPrefetcher, AFailedBuildIsAnErrorNamingTheSource) {
  BatchPrefetcher pf(
      2, 1,
      [](int64_t s) -> Batch {
        if (s == 1) throw std::runtime_error("shard 3 is truncated");
        return batch_at(s);
      },
      "data/x");
  pf.start(0);
  EXPECT_EQ(pf.take(0).batch.tokens[0], 0);
  try {
    pf.take(1);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "data/x: the prefetch thread failed: shard 3 is truncated");
  }
}

}  // namespace
}  // namespace ft

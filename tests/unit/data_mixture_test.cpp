// Weighted mixtures (data/loader/mixture.h): every window of batch_size × 100 consecutive samples holds
// exactly each source's quota (sliding windows, not only aligned ones), the order is a pure
// function of (seed, sample), no sequence repeats within a pass over its lane, rank slices
// concatenate to the global batch at any dp and resume under another dp continues the order,
// and a weight change at a resume holds from that sample on without replaying sequences.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "data/loader/mixture.h"
#include "data/loader/mixture_loader.h"
#include "data/loader/sequence_plan.h"
#include "data_test_util.h"
#include "util/error.h"

namespace ft {
namespace {

constexpr int64_t kB = 8, kSeq = 16;

std::vector<uint64_t> shard_tokens(int64_t shards, int64_t tokens) {
  return std::vector<uint64_t>(static_cast<size_t>(shards), static_cast<uint64_t>(tokens));
}

// Counts of each source in every window [a, a + W) for a in [from, to), via prefix sums.
void expect_exact_windows(const MixturePlan& plan, int64_t from, int64_t to, const std::vector<int64_t>& quota) {
  const int64_t W = plan.period();
  std::vector<std::vector<int64_t>> prefix(quota.size(), std::vector<int64_t>(1, 0));
  for (int64_t g = from; g < to + W; ++g) {
    int s = plan.pick(g).source;
    for (size_t i = 0; i < quota.size(); ++i) prefix[i].push_back(prefix[i].back() + (static_cast<size_t>(s) == i));
  }
  for (int64_t a = 0; a < to - from; ++a)
    for (size_t i = 0; i < quota.size(); ++i)
      ASSERT_EQ(prefix[i][static_cast<size_t>(a + W)] - prefix[i][static_cast<size_t>(a)], quota[i])
          << "window at sample " << from + a << ", source " << i;
}

TEST(Mixture, ApportionIsLargestRemainder) {
  EXPECT_EQ(apportion({0.5, 0.3, 0.2}, 800), (std::vector<int64_t>{400, 240, 160}));
  EXPECT_EQ(apportion({1, 1, 1}, 800), (std::vector<int64_t>{267, 267, 266}));
  EXPECT_EQ(apportion({2, 0, 1}, 10), (std::vector<int64_t>{7, 0, 3}));
}

TEST(Mixture, EveryWindowOfAHundredBatchesHoldsTheExactQuotas) {
  SequencePlan a(shard_tokens(3, 2000), kSeq, kB, 7, true, "a"), b(shard_tokens(2, 900), kSeq, kB, 7, true, "b"),
      c(shard_tokens(5, 3000), kSeq, kB, 7, true, "c");
  for (std::map<std::string, double> w : {std::map<std::string, double>{{"a", 0.5}, {"b", 0.3}, {"c", 0.2}},
                                          {{"a", 1.0 / 3}, {"b", 2.0 / 3}, {"c", 0.0}},
                                          {{"a", 0.9}, {"b", 0.05}, {"c", 0.05}}}) {
    MixturePlan plan({"a", "b", "c"}, {&a, &b, &c}, kB, 1234, {{0, w}});
    ASSERT_EQ(plan.period(), 100 * kB);
    std::vector<int64_t> quota = {plan.quota(0, 0), plan.quota(0, 1), plan.quota(0, 2)};
    EXPECT_EQ(quota, apportion({w["a"], w["b"], w["c"]}, plan.period()));
    expect_exact_windows(plan, 0, 3 * plan.period(), quota);
    // Each batch is a mix, not one source: over the first 100 steps no batch lacks the 0.5 source.
    if (w["a"] == 0.5) {
      int without_a = 0;
      for (int64_t k = 0; k < 100; ++k) {
        bool has = false;
        for (int64_t j = 0; j < kB; ++j) has |= plan.pick(k * kB + j).source == 0;
        without_a += !has;
      }
      EXPECT_LT(without_a, 5);
    }
  }
}

TEST(Mixture, OrderIsAPureFunctionOfSeedAndSample) {
  SequencePlan a(shard_tokens(3, 2000), kSeq, kB, 7, true, "a"), b(shard_tokens(2, 900), kSeq, kB, 7, true, "b");
  std::vector<MixtureSegment> h = {{0, {{"a", 0.6}, {"b", 0.4}}}};
  MixturePlan p1({"a", "b"}, {&a, &b}, kB, 1234, h), p2({"a", "b"}, {&a, &b}, kB, 1234, h),
      p3({"a", "b"}, {&a, &b}, kB, 99, h);
  int differ = 0;
  for (int64_t g = 5000; g >= 0; g -= 7) {  // any order of queries
    auto x = p1.pick(g), y = p2.pick(g), z = p3.pick(g);
    EXPECT_EQ(x.source, y.source);
    EXPECT_EQ(x.sequence, y.sequence);
    differ += x.source != z.source || x.sequence != z.sequence;
  }
  EXPECT_GT(differ, 100);  // the seed matters
}

TEST(Mixture, NoSequenceRepeatsWithinAPassOverItsLane) {
  SequencePlan a(shard_tokens(2, 1000), kSeq, kB, 7, true, "a"), b(shard_tokens(1, 700), kSeq, kB, 7, true, "b");
  MixturePlan plan({"a", "b"}, {&a, &b}, kB, 5, {{0, {{"a", 0.7}, {"b", 0.3}}}});
  const SequencePlan* lanes[2] = {&a, &b};
  std::map<std::pair<int, int64_t>, std::map<int64_t, std::set<uint64_t>>> seen;  // (source, lane) -> pass -> seqs
  for (int64_t g = 0; g < 20 * plan.period(); ++g) {
    auto p = plan.pick(g);
    const int64_t j = g % kB;
    const SequencePlan& l = *lanes[p.source];
    ASSERT_GE(p.sequence, l.lane_begin(j));
    ASSERT_LT(p.sequence, l.lane_begin(j + 1));  // position j reads lane j only
    auto& pass = seen[std::make_pair(p.source, j)][p.lane_pass];
    EXPECT_TRUE(pass.insert(p.sequence).second) << "repeat in a pass at sample " << g;
  }
  for (auto& [key, passes] : seen) {
    auto [s, j] = key;
    uint64_t lane = lanes[s]->lane_begin(j + 1) - lanes[s]->lane_begin(j);
    for (auto& [pass, seqs] : passes) {
      if (std::next(passes.find(pass)) != passes.end()) {
        EXPECT_EQ(seqs.size(), lane);  // completed passes are whole
      }
    }
  }
}

TEST(Mixture, WeightsChangeAtAResumeWithoutReplayingSequences) {
  SequencePlan a(shard_tokens(2, 4000), kSeq, kB, 7, true, "a"), b(shard_tokens(2, 4000), kSeq, kB, 7, true, "b");
  const int64_t resume = 37 * kB;  // mid-period
  std::vector<MixtureSegment> one = {{0, {{"a", 0.5}, {"b", 0.5}}}};
  std::vector<MixtureSegment> two = {{0, {{"a", 0.5}, {"b", 0.5}}}, {resume, {{"a", 0.2}, {"b", 0.8}}}};
  MixturePlan before({"a", "b"}, {&a, &b}, kB, 3, one), after({"a", "b"}, {&a, &b}, kB, 3, two);
  std::map<std::pair<int, int64_t>, std::set<uint64_t>> used;  // per (source, lane): first passes only
  for (int64_t g = 0; g < resume; ++g) {
    auto x = before.pick(g), y = after.pick(g);
    ASSERT_EQ(x.source, y.source);  // the past is unchanged
    ASSERT_EQ(x.sequence, y.sequence);
    used[std::make_pair(x.source, g % kB)].insert(x.sequence);
  }
  EXPECT_EQ(after.quota(resume, 0), 160);
  EXPECT_EQ(after.quota(resume, 1), 640);
  expect_exact_windows(after, resume, resume + 2 * after.period(), {160, 640});
  for (int64_t g = resume; g < resume + after.period(); ++g) {
    auto y = after.pick(g);
    if (y.lane_pass == 0) {
      EXPECT_FALSE(used[std::make_pair(y.source, g % kB)].count(y.sequence)) << "replayed at sample " << g;
    }
  }
}

TEST(Mixture, ParseNamesSourcesAndRejectsBadSpecs) {
  auto s = parse_mixture("ru=0.5, en = 0.5", "data/manpages");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].name, "ru");
  EXPECT_EQ(s[0].language, "ru");
  EXPECT_EQ(s[0].path, "data/manpages");
  auto t = parse_mixture("data/web=0.3, gs://b/ds/manpages#ru=0.7", "");
  EXPECT_EQ(t[0].name, "web");
  EXPECT_EQ(t[1].name, "manpages_ru");
  EXPECT_EQ(t[1].path, "gs://b/ds/manpages");
  EXPECT_EQ(t[1].weight, 0.7);
  // DIR#LANG is a directory without "./" (issue 30, defect 17), with or without data.path.
  for (const char* path : {"data/manpages", ""}) {
    auto u = parse_mixture("ds_man#en=0.5, ds_man#ru=0.5", path);
    ASSERT_EQ(u.size(), 2u);
    EXPECT_EQ(u[0].path, "ds_man");
    EXPECT_EQ(u[0].language, "en");
    EXPECT_EQ(u[1].name, "ds_man_ru");
  }
  EXPECT_THROW(parse_mixture("ru", "d"), Error);
  EXPECT_THROW(parse_mixture("ru=-1", "d"), Error);
  EXPECT_THROW(parse_mixture("ru=x", "d"), Error);
  EXPECT_THROW(parse_mixture("ru=0, en=0", "d"), Error);
  EXPECT_THROW(parse_mixture("ru=1, ru=2", "d"), Error);
  EXPECT_THROW(parse_mixture("ru=1", ""), Error);
}

class MixtureLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::scratch_dir("mixture");
    std::filesystem::create_directories(root_ + "/a");
    std::filesystem::create_directories(root_ + "/b");
    testing::make_fake_dataset(root_ + "/a", {2000, 1500, 1800}, {600});
    testing::make_fake_dataset(root_ + "/b", {900, 1100}, {600});
  }
  std::unique_ptr<MixtureLoader> make(int64_t rank, int64_t world, const std::string& spec) {
    DatasetLoaderOptions o;
    o.seq_len = kSeq;
    o.global_batch = kB;
    o.seed = 11;
    o.dp_rank = rank;
    o.dp_size = world;
    return std::make_unique<MixtureLoader>(parse_mixture(spec, ""), o);
  }
  std::vector<int32_t> gather(std::vector<std::unique_ptr<MixtureLoader>>& ranks) {
    std::vector<int32_t> all;
    for (auto& l : ranks) {
      Batch b = l->next();
      all.insert(all.end(), b.tokens.begin(), b.tokens.end());
    }
    return all;
  }
  std::string root_;
};

TEST_F(MixtureLoaderTest, RankSlicesConcatenateAndResumeUnderAnotherDpContinues) {
  const std::string spec = root_ + "/a=0.6, " + root_ + "/b=0.4";
  std::vector<std::unique_ptr<MixtureLoader>> one, two, four;
  one.push_back(make(0, 1, spec));
  for (int r = 0; r < 2; ++r) two.push_back(make(r, 2, spec));
  std::vector<std::vector<int32_t>> want;
  for (int k = 0; k < 30; ++k) {
    want.push_back(gather(one));
    ASSERT_EQ(gather(two), want.back()) << "step " << k;
  }
  LoaderState st = two[0]->state();
  EXPECT_EQ(st.next_sample, 30 * kB);
  EXPECT_NE(st.mixture.find("\"a\":0.6"), std::string::npos) << st.mixture;
  for (int r = 0; r < 4; ++r) {
    four.push_back(make(r, 4, spec));
    four.back()->restore(st);
  }
  for (int k = 0; k < 10; ++k) ASSERT_EQ(gather(four), gather(one)) << "step " << 30 + k << " after resuming at dp 4";
}

TEST_F(MixtureLoaderTest, NewWeightsAtResumeAreRecordedInTheState) {
  auto l = make(0, 1, root_ + "/a=0.5, " + root_ + "/b=0.5");
  for (int k = 0; k < 5; ++k) l->next();
  LoaderState st = l->state();
  auto m = make(0, 1, root_ + "/a=0.1, " + root_ + "/b=0.9");
  m->restore(st);
  auto h = mixture_history_from_json(m->state().mixture);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[1].from_sample, 5 * kB);
  EXPECT_EQ(h[1].weights.at("b"), 0.9);
  EXPECT_EQ(m->plan().quota(5 * kB, 1), 720);
  // Same weights again: no new segment.
  auto n = make(0, 1, root_ + "/a=0.1, " + root_ + "/b=0.9");
  n->restore(m->state());
  EXPECT_EQ(mixture_history_from_json(n->state().mixture).size(), 2u);
}

}  // namespace
}  // namespace ft

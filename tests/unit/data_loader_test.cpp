// The dataset loader: global order as a pure function of (seed, epoch, sample), rank slices,
// per-rank shard ranges (each rank opens only its own shards), exact resume (also under another
// number of ranks), checksum on open, validation split; under context parallelism each cp rank
// reads only its zig-zag chunks (+ targets).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "data/loader/dataset_loader.h"
#include "data_test_util.h"
#include "model/context_split.h"
#include "util/error.h"

namespace ft {
namespace {

using testing::FakeDataset;

DatasetLoaderOptions opts(const std::string& dir, int64_t rank, int64_t world, int64_t batch = 8, int64_t seq = 16,
                          Split split = Split::kTrain) {
  DatasetLoaderOptions o;
  o.dir = dir;
  o.split = split;
  o.seq_len = seq;
  o.global_batch = batch;
  o.seed = 99;
  o.dp_rank = rank;
  o.dp_size = world;
  return o;
}

// The global batch of the next step, gathered from every rank's loader in rank order.
std::vector<int32_t> gather(std::vector<std::unique_ptr<DatasetLoader>>& ranks) {
  std::vector<int32_t> all;
  for (auto& l : ranks) {
    Batch b = l->next();
    all.insert(all.end(), b.tokens.begin(), b.tokens.end());
  }
  return all;
}

std::vector<std::unique_ptr<DatasetLoader>> make_ranks(const std::string& dir, int64_t world, int64_t batch = 8) {
  std::vector<std::unique_ptr<DatasetLoader>> v;
  for (int64_t r = 0; r < world; ++r) v.push_back(std::make_unique<DatasetLoader>(opts(dir, r, world, batch)));
  return v;
}

class LoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // 8 training shards of uneven sizes, 2 validation shards.
    ds_ = testing::make_fake_dataset(testing::scratch_dir("loader"), {400, 337, 512, 289, 460, 401, 350, 377},
                                     {200, 150});
  }
  FakeDataset ds_;
};

TEST_F(LoaderTest, SequencesAreWindowsOfTheShards) {
  DatasetLoader l(opts(ds_.dir, 0, 1));
  for (int step = 0; step < 5; ++step) {
    int64_t first = l.state().next_sample;
    Batch b = l.next();
    for (int64_t i = 0; i < b.batch; ++i) {
      SequencePlan::Location loc = l.plan().locate(first + i);
      const auto& shard = ds_.train_tokens[static_cast<size_t>(loc.shard)];
      ASSERT_EQ(loc.first_token % 16, 0u);
      ASSERT_LE(loc.first_token + 17, shard.size());
      for (int64_t t = 0; t <= 16; ++t) ASSERT_EQ(b.sequence(i)[t], shard[loc.first_token + static_cast<size_t>(t)]);
    }
  }
}

TEST_F(LoaderTest, OrderIsAPureFunctionOfSeedAndSample) {
  DatasetLoader a(opts(ds_.dir, 0, 1)), b(opts(ds_.dir, 0, 1));
  auto oc = opts(ds_.dir, 0, 1);
  oc.seed = 100;
  DatasetLoader c(oc);
  bool differs = false;
  for (int step = 0; step < 10; ++step) {
    Batch x = a.next(), y = b.next(), z = c.next();
    EXPECT_EQ(x.tokens, y.tokens);
    differs |= x.tokens != z.tokens;
  }
  EXPECT_TRUE(differs) << "another seed must give another order";
}

TEST_F(LoaderTest, AnEpochVisitsEachSequenceAtMostOnceAndEpochsDiffer) {
  DatasetLoader l(opts(ds_.dir, 0, 1));
  const SequencePlan& p = l.plan();
  int64_t E = p.steps_per_epoch(), B = 8;
  ASSERT_GE(E, 10);
  std::set<uint64_t> epoch0, epoch1;
  for (int64_t g = 0; g < E * B; ++g) EXPECT_TRUE(epoch0.insert(p.sequence_of(g)).second) << g;
  for (int64_t g = E * B; g < 2 * E * B; ++g) EXPECT_TRUE(epoch1.insert(p.sequence_of(g)).second) << g;
  EXPECT_GE(epoch0.size(), p.num_sequences() - static_cast<uint64_t>(B));  // at most one left out per lane
  std::vector<uint64_t> first0, first1;
  for (int64_t g = 0; g < B * 4; ++g) {
    first0.push_back(p.sequence_of(g));
    first1.push_back(p.sequence_of(E * B + g));
  }
  EXPECT_NE(first0, first1);
  // Advancing through an epoch updates the state's epoch.
  for (int64_t s = 0; s < E; ++s) l.next();
  EXPECT_EQ(l.state().epoch, 1);
}

TEST_F(LoaderTest, RankSlicesConcatenateToTheGlobalBatch) {
  auto one = make_ranks(ds_.dir, 1);
  auto two = make_ranks(ds_.dir, 2);
  auto four = make_ranks(ds_.dir, 4);
  auto eight = make_ranks(ds_.dir, 8);
  for (int step = 0; step < 12; ++step) {
    std::vector<int32_t> ref = gather(one);
    EXPECT_EQ(gather(two), ref) << step;
    EXPECT_EQ(gather(four), ref) << step;
    EXPECT_EQ(gather(eight), ref) << step;
  }
}

TEST_F(LoaderTest, BytesReadAreTheVerifiedShardsThenTheCopiedTokens) {
  const int64_t world = 4, B = 8, seq = 16;
  for (int64_t r = 0; r < world; ++r) {
    DatasetLoaderOptions o = opts(ds_.dir, r, world, B, seq);
    o.prefetch = 0;  // nothing read ahead: the count moves only in next()
    DatasetLoader l(o);
    int64_t files = 0;
    for (const std::string& f : l.opened_shards()) files += static_cast<int64_t>(std::filesystem::file_size(f));
    EXPECT_EQ(l.bytes_read(), files) << "rank " << r;
    l.next();
    l.next();
    EXPECT_EQ(l.bytes_read(), files + 2 * (B / world) * (seq + 1) * l.manifest().token_bytes) << "rank " << r;
  }
}

TEST_F(LoaderTest, EachRankOpensOnlyTheShardsItReads) {
  const int64_t world = 4, B = 8;
  std::vector<std::set<std::string>> opened(world), used(world);
  for (int64_t r = 0; r < world; ++r) {
    DatasetLoader l(opts(ds_.dir, r, world, B));
    opened[r].insert(l.opened_shards().begin(), l.opened_shards().end());
    EXPECT_EQ(opened[r].size(), l.opened_shards().size());
    // Every sample this rank takes over three epochs comes from a shard it opened.
    int64_t steps = 3 * l.plan().steps_per_epoch();
    for (int64_t k = 0; k < steps; ++k) {
      for (int64_t i = r * B / world; i < (r + 1) * B / world; ++i) {
        auto loc = l.plan().locate(k * B + i);
        used[r].insert(fmt::format("{}/{}", ds_.dir, l.manifest().train.shards[static_cast<size_t>(loc.shard)].file));
      }
    }
    // Opened exactly what it uses: nothing of another rank's range.
    EXPECT_EQ(opened[r], used[r]) << "rank " << r;
  }
  // Ranges are contiguous and ordered; neighbours share at most the one boundary shard.
  for (int64_t r = 0; r + 1 < world; ++r) {
    std::vector<std::string> both;
    std::set_intersection(opened[r].begin(), opened[r].end(), opened[r + 1].begin(), opened[r + 1].end(),
                          std::back_inserter(both));
    EXPECT_LE(both.size(), 1u);
    EXPECT_LE(*opened[r].rbegin(), *opened[r + 1].begin());
  }
  std::set<std::string> all;
  for (auto& s : opened) all.insert(s.begin(), s.end());
  EXPECT_EQ(all.size(), 8u);
  EXPECT_LT(opened[0].size(), 8u);
}

TEST_F(LoaderTest, ResumeGivesTheSameLaterBatches) {
  DatasetLoader a(opts(ds_.dir, 0, 1));
  for (int s = 0; s < 7; ++s) a.next();
  LoaderState st = a.state();
  std::vector<std::vector<int32_t>> later;
  for (int s = 0; s < 30; ++s) later.push_back(a.next().tokens);  // crosses an epoch boundary
  DatasetLoader b(opts(ds_.dir, 0, 1));
  b.restore(st);
  for (int s = 0; s < 30; ++s) EXPECT_EQ(b.next().tokens, later[static_cast<size_t>(s)]) << s;
}

TEST_F(LoaderTest, ResumeUnderAnotherRankCountContinuesTheGlobalOrder) {
  auto one = make_ranks(ds_.dir, 1);
  std::vector<std::vector<int32_t>> ref;
  for (int s = 0; s < 12; ++s) ref.push_back(gather(one));
  auto two = make_ranks(ds_.dir, 2);
  for (int s = 0; s < 5; ++s) EXPECT_EQ(gather(two), ref[static_cast<size_t>(s)]);
  LoaderState st = two[0]->state();
  EXPECT_EQ(st.next_sample, 5 * 8);
  auto four = make_ranks(ds_.dir, 4);
  for (auto& l : four) l->restore(st);
  for (int s = 5; s < 12; ++s) EXPECT_EQ(gather(four), ref[static_cast<size_t>(s)]) << s;
}

TEST_F(LoaderTest, PrefetchDoesNotChangeTheBatches) {
  auto o = opts(ds_.dir, 1, 2);
  o.prefetch = 0;
  DatasetLoader sync(o);
  o.prefetch = 3;
  DatasetLoader async(o);
  for (int s = 0; s < 20; ++s) EXPECT_EQ(sync.next().tokens, async.next().tokens);
  async.restore(LoaderState{16, 0, ""});
  sync.restore(LoaderState{16, 0, ""});
  EXPECT_EQ(sync.next().tokens, async.next().tokens);
}

TEST_F(LoaderTest, ValidationIsFixedAndRepeatable) {
  DatasetLoader v(opts(ds_.dir, 0, 1, 4, 16, Split::kValidation));
  Batch a = v.next(), b = v.next();
  v.restore(LoaderState{});
  EXPECT_EQ(v.next().tokens, a.tokens);
  EXPECT_EQ(v.next().tokens, b.tokens);
  EXPECT_DOUBLE_EQ(v.chars_per_token(), 4.0);
  EXPECT_DOUBLE_EQ(v.bytes_per_token(), 5.0);
  EXPECT_NE(v.tokenizer_hash(), 0u);
  // 4 characters per token: a loss of 4·ln 2 nats/token is 4 bits/token, 1 bit/character.
  EXPECT_DOUBLE_EQ(bits_per_char(4 * std::log(2.0), v.chars_per_token()), 1.0);
  EXPECT_DOUBLE_EQ(bits_per_char(1.0, 0.0), 0.0);
  // Validation samples come from validation shards.
  for (int64_t i = 0; i < a.batch; ++i) {
    auto loc = v.plan().locate(i);
    EXPECT_EQ(a.sequence(i)[0], ds_.val_tokens[static_cast<size_t>(loc.shard)][loc.first_token]);
  }
}

std::string error_of(const DatasetLoaderOptions& o) {
  try {
    DatasetLoader l(o);
  } catch (const Error& e) {
    return std::string(e.what()) + " | " + e.hint();
  }
  return "";
}

TEST_F(LoaderTest, CorruptShardIsRefusedByTheRankThatOpensItOnly) {
  std::string victim = ds_.dir + "/train-00007.ftshard";
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    char c = 0x55;
    f.write(&c, 1);
  }
  std::string e = error_of(opts(ds_.dir, 3, 4));
  EXPECT_NE(e.find("train-00007.ftshard"), std::string::npos) << e;
  EXPECT_NE(e.find("checksum mismatch"), std::string::npos) << e;
  EXPECT_EQ(error_of(opts(ds_.dir, 0, 4)), "");  // rank 0 never opens shard 7
}

TEST_F(LoaderTest, TruncatedShardAndTokenizerMismatchAreNamed) {
  std::filesystem::resize_file(ds_.dir + "/train-00000.ftshard", 300);
  std::string e = error_of(opts(ds_.dir, 0, 1));
  EXPECT_NE(e.find("train-00000.ftshard"), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
  write_file_atomic(ds_.dir + "/tokenizer.model", "another tokenizer");
  e = error_of(opts(ds_.dir, 0, 1));
  EXPECT_NE(e.find("tokenizer mismatch"), std::string::npos) << e;
  EXPECT_THROW(check_tokenizer_hash(1234, 5678, "ckpt/step-10"), Error);
  EXPECT_NO_THROW(check_tokenizer_hash(0, 5678, "ckpt/step-10"));
}

TEST_F(LoaderTest, BadSettingsAreExplained) {
  EXPECT_NE(error_of(opts(ds_.dir, 0, 3)).find("not divisible"), std::string::npos);
  EXPECT_NE(error_of(opts(ds_.dir, 0, 1, 8, 4096)).find("fewer than the global batch"), std::string::npos);
  auto o = opts(ds_.dir, 0, 1);
  o.model_vocab = 1000;
  EXPECT_NE(error_of(o).find("model.vocab_size"), std::string::npos);
  std::filesystem::remove(ds_.dir + "/manifest.json");
  EXPECT_NE(error_of(opts(ds_.dir, 0, 1)).find("not a fluxtrain dataset"), std::string::npos);
}

TEST_F(LoaderTest, RestoreRejectsAStateFromAnotherBatchSize) {
  DatasetLoader l(opts(ds_.dir, 0, 1));
  EXPECT_THROW(l.restore(LoaderState{12, 0, ""}), Error);
}

// Context parallelism: each cp rank of a dp rank reads only its two zig-zag chunks of every sample
// and the target past each — the bytes counter moves by exactly those tokens — and the ranks'
// tokens together are the cp = 1 loader's samples, position for position.
TEST_F(LoaderTest, ContextParallelRanksReadOnlyTheirChunks) {
  const int64_t B = 8, seq = 16, steps = 3;
  for (int64_t cp : {2, 4}) {
    for (int64_t dp : {1, 2}) {
      for (int64_t d = 0; d < dp; ++d) {
        DatasetLoaderOptions whole = opts(ds_.dir, d, dp, B, seq);
        whole.prefetch = 0;
        DatasetLoader ref(whole);
        std::vector<std::unique_ptr<DatasetLoader>> ranks;
        std::vector<int64_t> files(static_cast<size_t>(cp));
        for (int64_t r = 0; r < cp; ++r) {
          DatasetLoaderOptions o = whole;
          o.chunks = zigzag_ranges(seq, cp, r);
          ranks.push_back(std::make_unique<DatasetLoader>(o));
          files[static_cast<size_t>(r)] = ranks.back()->bytes_read();  // the verified shards
        }
        for (int64_t k = 0; k < steps; ++k) {
          Batch want = ref.next();
          std::vector<int> seen(static_cast<size_t>(seq + 1), 0);  // of sample 0, over the cp ranks
          for (int64_t r = 0; r < cp; ++r) {
            Batch got = ranks[static_cast<size_t>(r)]->next();
            ASSERT_EQ(got.tokens.size(), want.tokens.size());
            const SampleChunks reads = read_ranges(got.chunks, seq);
            for (int64_t i = 0; i < got.batch; ++i) {
              for (int64_t p = 0; p <= seq; ++p) {
                bool mine = false;
                for (auto [b, e] : reads) mine |= p >= b && p < e;
                if (i == 0 && mine) ++seen[static_cast<size_t>(p)];
                ASSERT_EQ(got.sequence(i)[p], mine ? want.sequence(i)[p] : 0)
                    << "cp " << cp << " rank " << r << " dp " << d << " step " << k << " sample " << i << " pos " << p;
              }
            }
          }
          for (int64_t p = 0; p <= seq; ++p) EXPECT_GE(seen[static_cast<size_t>(p)], 1) << "position " << p;
        }
        const int64_t tb = static_cast<int64_t>(ref.manifest().token_bytes), local = B / dp;
        for (int64_t r = 0; r < cp; ++r) {
          // seq / cp tokens of the two chunks + the two targets past them, per sample.
          EXPECT_EQ(ranks[static_cast<size_t>(r)]->bytes_read() - files[static_cast<size_t>(r)],
                    steps * local * (seq / cp + 2) * tb)
              << "cp " << cp << " rank " << r;
        }
      }
    }
  }
}

}  // namespace
}  // namespace ft

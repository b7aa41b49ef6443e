// The loader of a prepared dataset (data.source = "dataset", data.path = DIR, or a URL
// s3://bucket/prefix / gs://bucket/prefix of a prepared directory uploaded as is).
//
// At construction a rank reads the manifest, checks the tokenizer file's hash, works out from
// the SequencePlan which shards its batch positions can touch, and opens (mmap) and verifies
// the checksum of exactly those shards — never another rank's. From a URL the shards come
// through a ShardCache (shard_cache.h): only this rank's range is fetched, first the shards the
// next batches need, then the rest of the range while it fits in data.cache_bytes; each is
// verified before use. A BatchPrefetcher builds the next batches on a background thread; next()
// only waits when it is behind (last_wait_s()).
//
//   DatasetLoader dl({.dir = "data/manpages", .split = Split::kTrain, .seq_len = 256,
//                     .global_batch = 64, .seed = 1234, .dp_rank = r, .dp_size = R});
//   Batch b = dl.next();
//   dl.opened_shards();          // the shard files this rank opened, in order
//   dl.bytes_read();             // bytes read from them: verified shards whole, then copied tokens
//
// With opt.chunks (context parallelism) each sample's row holds only those chunks' tokens and
// their targets (data/loader/sample_chunks.h); only they are read and counted.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset_manifest.h"
#include "data/loader/batch_prefetcher.h"
#include "data/loader/loader.h"
#include "data/loader/sample_chunks.h"
#include "data/loader/sequence_plan.h"
#include "data/loader/shard_cache.h"

namespace ft {

struct DatasetLoaderOptions {
  std::string dir;
  Split split = Split::kTrain;
  int64_t seq_len = 256;
  int64_t global_batch = 8;
  uint64_t seed = 1234;
  int64_t dp_rank = 0, dp_size = 1;
  int64_t model_vocab = 0;  // > 0: refuse datasets whose vocabulary is larger
  int prefetch = 4;         // batches prepared ahead on the background thread; 0 = none
  bool verify = true;       // checksum every opened shard
  std::string language;     // only the split's shards of this language ("" = all)
  SampleChunks chunks;      // context parallelism: only these chunks of each sample (+ targets); empty = all
  // For a URL in `dir`: where this loader caches its shards, how many bytes at most, and the store.
  std::string cache_dir;
  uint64_t cache_bytes = uint64_t{4} << 30;
  ObjectStoreOptions store;
};

class DatasetLoader final : public DataLoader {
 public:
  explicit DatasetLoader(const DatasetLoaderOptions& opt);
  ~DatasetLoader() override;

  Batch next() override;
  LoaderState state() const override { return state_; }
  void restore(const LoaderState& s) override;
  double chars_per_token() const override;
  double bytes_per_token() const override;
  uint64_t tokenizer_hash() const override { return manifest_.tokenizer_hash; }
  double last_wait_s() const override { return last_wait_s_; }
  int64_t bytes_read() const override { return bytes_read_.load(std::memory_order_relaxed); }
  uint64_t fetched_bytes() const override { return cache_ ? cache_->fetched_bytes() : 0; }
  std::string describe() const override;
  std::pair<int64_t, int64_t> shard_range() const { return {first_shard_, last_shard_}; }

  const std::vector<std::string>& opened_shards() const { return opened_; }
  const DatasetManifest& manifest() const { return manifest_; }
  const SequencePlan& plan() const { return *plan_; }

  // Shard `s` of the loader's shards (the split's, or its language's; inside this rank's range),
  // opened or fetched.
  std::shared_ptr<const Shard> shard(int64_t s) const;
  // Copies this rank's ranges (opt.chunks) of the sample at `loc` into row (seq_len + 1 tokens),
  // adding their bytes to bytes_read().
  void copy_sample(const SequencePlan::Location& loc, int32_t* row) const;
  int64_t local_batch() const { return local_; }
  int64_t first_position() const { return first_pos_; }

 private:
  const SplitInfo& split_info() const { return manifest_.split(opt_.split); }
  const ShardInfo& info(int64_t s) const {
    return split_info().shards[static_cast<size_t>(subset_[static_cast<size_t>(s)])];
  }
  // The shards the batches at first_sample, +B, ... (n of them) read, in order of first use.
  std::vector<int64_t> shards_needed(int64_t first_sample, int64_t n) const;
  Batch build(int64_t first_sample) const;  // this rank's slice of the global batch at first_sample

  DatasetLoaderOptions opt_;
  DatasetManifest manifest_;
  std::unique_ptr<SequencePlan> plan_;
  std::vector<int64_t> subset_;  // the split's shard indices this loader reads (all, or one language's)
  int64_t first_shard_ = 0, last_shard_ = 0;
  std::unique_ptr<ShardCache> cache_;                 // a URL: shards fetched into a local cache
  std::vector<std::shared_ptr<const Shard>> shards_;  // a directory: [first_shard_, last_shard_) opened
  std::vector<std::string> opened_;
  int64_t local_ = 0, first_pos_ = 0;
  LoaderState state_;
  double last_wait_s_ = 0;
  mutable std::atomic<int64_t> bytes_read_{0};  // build() runs on the prefetch thread
  BatchPrefetcher prefetcher_;                  // last: stopped before the members build() reads go
};

}  // namespace ft

// The loader of a prepared dataset directory (data.source = "dataset", data.path = DIR).
//
// At construction a rank reads the manifest, checks the tokenizer file's hash, works out from
// the SequencePlan which shards its batch positions can touch, and opens (mmap) and verifies
// the checksum of exactly those shards — never another rank's. A background thread prefetches
// the next batches; next() only waits when the prefetcher is behind (last_wait_s()).
//
//   DatasetLoader dl({.dir = "data/manpages", .split = Split::kTrain, .seq_len = 256,
//                     .global_batch = 64, .seed = 1234, .dp_rank = r, .dp_size = R});
//   Batch b = dl.next();
//   dl.opened_shards();          // the shard files this rank opened, in order
//   dl.bytes_read();             // bytes read from them: verified shards whole, then copied tokens
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "data/loader.h"
#include "data/manifest.h"
#include "data/sequence_plan.h"

namespace ft {

struct DatasetLoaderOptions {
  std::string dir;
  Split split = Split::kTrain;
  int64_t seq_len = 256;
  int64_t global_batch = 8;
  uint64_t seed = 1234;
  int64_t dp_rank = 0, dp_size = 1;
  int64_t model_vocab = 0;     // > 0: refuse datasets whose vocabulary is larger
  int prefetch = 4;            // batches prepared ahead on the background thread; 0 = none
  bool verify = true;          // checksum every opened shard
};

class DatasetLoader final : public DataLoader {
 public:
  explicit DatasetLoader(const DatasetLoaderOptions& opt);
  ~DatasetLoader() override;

  Batch next() override;
  LoaderState state() const override { return state_; }
  void restore(const LoaderState& s) override;
  double chars_per_token() const override { return split_info().chars_per_token(); }
  double bytes_per_token() const override { return split_info().bytes_per_token(); }
  uint64_t tokenizer_hash() const override { return manifest_.tokenizer_hash; }
  double last_wait_s() const override { return last_wait_s_; }
  int64_t bytes_read() const override { return bytes_read_.load(std::memory_order_relaxed); }
  std::string describe() const override;

  const std::vector<std::string>& opened_shards() const { return opened_; }
  const DatasetManifest& manifest() const { return manifest_; }
  const SequencePlan& plan() const { return *plan_; }

 private:
  const SplitInfo& split_info() const { return manifest_.split(opt_.split); }
  Batch build(int64_t first_sample) const;  // this rank's slice of the global batch at first_sample
  void start_prefetch();
  void stop_prefetch();

  DatasetLoaderOptions opt_;
  DatasetManifest manifest_;
  std::unique_ptr<SequencePlan> plan_;
  int64_t first_shard_ = 0;
  std::vector<std::unique_ptr<Shard>> shards_;  // [first_shard_, first_shard_ + size)
  std::vector<std::string> opened_;
  int64_t local_ = 0, first_pos_ = 0;
  LoaderState state_;
  double last_wait_s_ = 0;
  mutable std::atomic<int64_t> bytes_read_{0};  // build() runs on the prefetch thread

  // Prefetch: the thread fills queue_ with batches for samples produce_next_, +B, ...
  std::thread worker_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<int64_t, Batch>> queue_;
  int64_t produce_next_ = 0;
  bool stop_ = false;
  std::string worker_error_;
};

}  // namespace ft

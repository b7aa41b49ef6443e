// The loader of a weighted mixture (data.mixture; the order is data/loader/mixture.h's MixturePlan).
// Each source is read through its own DatasetLoader (a dataset directory or URL, optionally one
// language's shards) that opens or fetches only this rank's lanes of it; this class picks, for
// every sample of this rank's slice, the source and sequence, and prefetches batches through a
// BatchPrefetcher like DatasetLoader.
//
//   MixtureLoader ml(sources, base_options);           // base_options: batch, seq_len, seed, rank, ...
//   Batch b = ml.next();
//   ml.state().mixture;   // the weights history, saved in checkpoints; restore() may append a segment
//
// Validation per source: make_validation_sources() (loader.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/loader/batch_prefetcher.h"
#include "data/loader/dataset_loader.h"
#include "data/loader/mixture.h"

namespace ft {

class MixtureLoader final : public DataLoader {
 public:
  // base.dir / base.language are ignored (each source has its own); base.cache_dir is a root under
  // which each source caches its shards.
  MixtureLoader(std::vector<MixtureSource> sources, const DatasetLoaderOptions& base);
  ~MixtureLoader() override;

  Batch next() override;
  LoaderState state() const override;
  // Continues the saved order; when the configured weights differ from the last saved ones, they
  // hold from s.next_sample on (a new segment, logged).
  void restore(const LoaderState& s) override;
  uint64_t tokenizer_hash() const override { return sources_loaders_.front()->tokenizer_hash(); }
  double last_wait_s() const override { return last_wait_s_; }
  uint64_t fetched_bytes() const override;
  std::string describe() const override;

  const MixturePlan& plan() const { return *plan_; }
  const std::vector<MixtureSource>& sources() const { return sources_; }
  const DatasetLoader& source_loader(size_t i) const { return *sources_loaders_[i]; }

 private:
  void rebuild_plan(std::vector<MixtureSegment> history);
  Batch build(int64_t first_sample) const;

  std::vector<MixtureSource> sources_;
  DatasetLoaderOptions base_;
  std::vector<std::unique_ptr<DatasetLoader>> sources_loaders_;
  std::unique_ptr<MixturePlan> plan_;
  int64_t local_ = 0, first_pos_ = 0;
  LoaderState state_;
  double last_wait_s_ = 0;
  BatchPrefetcher prefetcher_;  // last: stopped before the members build() reads go
};

}  // namespace ft

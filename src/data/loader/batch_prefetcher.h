// BatchPrefetcher: builds the batches at samples s, s + stride, s + 2·stride, ... on a background
// thread, up to `depth` ahead of the consumer, so that take() only waits when the builder is
// behind. With depth 0 take() builds the batch itself. The loaders of a dataset and of a mixture
// both read through one.
//
//   BatchPrefetcher pf(/*depth=*/4, /*stride=*/global_batch, [&](int64_t s) { return build(s); }, "data/x");
//   pf.start(next_sample);                        // again after stop() at a restored position
//   auto [batch, waited_s] = pf.take(next_sample);
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "data/loader/loader.h"

namespace ft {

class BatchPrefetcher {
 public:
  using Build = std::function<Batch(int64_t first_sample)>;
  // `name` starts the error message of a failed build (a dataset directory, "data.mixture").
  BatchPrefetcher(int depth, int64_t stride, Build build, std::string name);
  ~BatchPrefetcher() { stop(); }
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  // Starts building from `first_sample` (a no-op with depth 0).
  void start(int64_t first_sample);
  // Stops the thread; the batches built ahead are dropped.
  void stop();

  struct Taken {
    Batch batch;
    double wait_s = 0;  // how long take() waited for the builder
  };
  // The batch at `sample` (the next one in the sequence start() began).
  Taken take(int64_t sample);

 private:
  const int depth_;
  const int64_t stride_;
  const Build build_;
  const std::string name_;
  std::thread worker_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<int64_t, Batch>> queue_;  // (first sample, batch), in order
  int64_t produce_next_ = 0;
  bool stop_ = false;
  std::string worker_error_;
};

}  // namespace ft

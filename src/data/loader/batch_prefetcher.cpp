#include "data/loader/batch_prefetcher.h"

#include <chrono>

#include "util/error.h"

namespace ft {

BatchPrefetcher::BatchPrefetcher(int depth, int64_t stride, Build build, std::string name)
    : depth_(depth), stride_(stride), build_(std::move(build)), name_(std::move(name)) {}

void BatchPrefetcher::start(int64_t first_sample) {
  if (depth_ <= 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = false;
    queue_.clear();
    produce_next_ = first_sample;
    worker_error_.clear();
  }
  worker_ = std::thread([this] {
    while (true) {
      int64_t sample;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || static_cast<int>(queue_.size()) < depth_; });
        if (stop_) return;
        sample = produce_next_;
        produce_next_ += stride_;
      }
      Batch b;
      try {
        b = build_(sample);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu_);
        worker_error_ = e.what();
        cv_.notify_all();
        return;
      }
      std::lock_guard<std::mutex> lock(mu_);
      queue_.emplace_back(sample, std::move(b));
      cv_.notify_all();
    }
  });
}

void BatchPrefetcher::stop() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

BatchPrefetcher::Taken BatchPrefetcher::take(int64_t sample) {
  if (depth_ <= 0) return {build_(sample), 0.0};
  auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !queue_.empty() || !worker_error_.empty(); });
  if (queue_.empty()) throw Error(fmt::format("{}: the prefetch thread failed: {}", name_, worker_error_));
  FT_CHECK(queue_.front().first == sample, "prefetched sample {} but expected {}", queue_.front().first, sample);
  Taken t{std::move(queue_.front().second), 0.0};
  queue_.pop_front();
  lock.unlock();
  cv_.notify_all();
  t.wait_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return t;
}

}  // namespace ft

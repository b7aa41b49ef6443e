#include "data/dataset_loader.h"

#include <chrono>
#include <filesystem>

#include "util/error.h"
#include "util/log.h"

namespace ft {

DatasetLoader::DatasetLoader(const DatasetLoaderOptions& opt) : opt_(opt) {
  if (opt.dp_size < 1 || opt.dp_rank < 0 || opt.dp_rank >= opt.dp_size) {
    throw Error(fmt::format("data-parallel rank {} of {} is out of range", opt.dp_rank, opt.dp_size));
  }
  if (opt.global_batch % opt.dp_size != 0) {
    throw Error(fmt::format("train.batch_size = {} is not divisible by the {} data-parallel ranks", opt.global_batch,
                            opt.dp_size),
                fmt::format("use a batch size that is a multiple of {}", opt.dp_size));
  }
  manifest_ = DatasetManifest::load(opt.dir);
  manifest_.check_tokenizer(opt.dir);
  if (opt.model_vocab > 0 && manifest_.vocab_size > opt.model_vocab) {
    throw Error(fmt::format("{}: the dataset's tokenizer has {} tokens but model.vocab_size = {}", opt.dir,
                            manifest_.vocab_size, opt.model_vocab),
                fmt::format("set model.vocab_size = {} (or larger)", manifest_.vocab_size));
  }
  const SplitInfo& si = split_info();
  const char* split_name = opt.split == Split::kTrain ? "train" : "validation";
  std::vector<uint64_t> tokens;
  for (const ShardInfo& s : si.shards) tokens.push_back(s.tokens);
  plan_ = std::make_unique<SequencePlan>(tokens, opt.seq_len, opt.global_batch, opt.seed, opt.split == Split::kTrain,
                                         fmt::format("{} ({} split)", opt.dir, split_name));
  local_ = opt.global_batch / opt.dp_size;
  first_pos_ = opt.dp_rank * local_;
  auto [first, last] = plan_->shard_range(opt.dp_rank, opt.dp_size);
  first_shard_ = first;
  for (int64_t s = first; s < last; ++s) {
    const ShardInfo& info = si.shards[static_cast<size_t>(s)];
    std::string path = (std::filesystem::path(opt.dir) / info.file).string();
    auto shard = std::make_unique<Shard>(path);
    const ShardView& v = shard->view();
    if (v.num_tokens() != info.tokens || v.num_docs() != info.documents || v.header().checksum != info.checksum ||
        v.token_bytes() != manifest_.token_bytes) {
      throw Error(fmt::format("{}: the shard does not match the manifest ({} tokens, {} documents, checksum {}; "
                              "manifest: {}, {}, {})",
                              path, v.num_tokens(), v.num_docs(), hex64(v.header().checksum), info.tokens,
                              info.documents, hex64(info.checksum)),
                  "the dataset directory mixes files of two preparations; re-run `fluxtrain prepare`");
    }
    if (opt.verify) v.verify();
    bytes_read_ += static_cast<int64_t>(opt.verify ? v.header().file_bytes : kShardHeaderBytes);
    opened_.push_back(path);
    shards_.push_back(std::move(shard));
  }
  start_prefetch();
}

DatasetLoader::~DatasetLoader() { stop_prefetch(); }

std::string DatasetLoader::describe() const {
  return fmt::format("{} ({} split: {} sequences of {} + 1 tokens, {} steps per epoch; rank {} of {} reads shards "
                     "[{}, {}) of {})",
                     opt_.dir, opt_.split == Split::kTrain ? "train" : "validation", plan_->num_sequences(),
                     opt_.seq_len, plan_->steps_per_epoch(), opt_.dp_rank, opt_.dp_size, first_shard_,
                     first_shard_ + static_cast<int64_t>(shards_.size()), split_info().shards.size());
}

Batch DatasetLoader::build(int64_t first_sample) const {
  Batch b;
  b.batch = local_;
  b.seq_len = opt_.seq_len;
  b.tokens.resize(static_cast<size_t>(local_ * (opt_.seq_len + 1)));
  for (int64_t i = 0; i < local_; ++i) {
    SequencePlan::Location loc = plan_->locate(first_sample + first_pos_ + i);
    int64_t idx = loc.shard - first_shard_;
    FT_CHECK(idx >= 0 && idx < static_cast<int64_t>(shards_.size()), "sample {} maps to shard {} outside [{}, {})",
             first_sample + first_pos_ + i, loc.shard, first_shard_, first_shard_ + static_cast<int64_t>(shards_.size()));
    shards_[static_cast<size_t>(idx)]->view().copy_tokens(loc.first_token, static_cast<uint64_t>(opt_.seq_len + 1),
                                                        b.tokens.data() + i * (opt_.seq_len + 1));
    bytes_read_ += (opt_.seq_len + 1) * static_cast<int64_t>(manifest_.token_bytes);
  }
  return b;
}

void DatasetLoader::start_prefetch() {
  if (opt_.prefetch <= 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = false;
    queue_.clear();
    produce_next_ = state_.next_sample;
    worker_error_.clear();
  }
  worker_ = std::thread([this] {
    while (true) {
      int64_t sample;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || static_cast<int>(queue_.size()) < opt_.prefetch; });
        if (stop_) return;
        sample = produce_next_;
        produce_next_ += opt_.global_batch;
      }
      Batch b;
      try {
        b = build(sample);
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

void DatasetLoader::stop_prefetch() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

Batch DatasetLoader::next() {
  int64_t sample = state_.next_sample;
  Batch b;
  if (opt_.prefetch <= 0) {
    last_wait_s_ = 0;
    b = build(sample);
  } else {
    auto t0 = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !queue_.empty() || !worker_error_.empty(); });
    if (queue_.empty()) throw Error(fmt::format("{}: the prefetch thread failed: {}", opt_.dir, worker_error_));
    FT_CHECK(queue_.front().first == sample, "prefetched sample {} but expected {}", queue_.front().first, sample);
    b = std::move(queue_.front().second);
    queue_.pop_front();
    lock.unlock();
    cv_.notify_all();
    last_wait_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  state_.next_sample += opt_.global_batch;
  state_.epoch = plan_->epoch_of(state_.next_sample);
  return b;
}

void DatasetLoader::restore(const LoaderState& s) {
  if (s.next_sample < 0 || s.next_sample % opt_.global_batch != 0) {
    throw Error(fmt::format("loader state: sample index {} is not a multiple of the global batch {}", s.next_sample,
                            opt_.global_batch),
                "resume with the train.batch_size the checkpoint was written with");
  }
  stop_prefetch();
  state_.next_sample = s.next_sample;
  state_.epoch = plan_->epoch_of(s.next_sample);
  start_prefetch();
}

}  // namespace ft

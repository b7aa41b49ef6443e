#include "data/loader/loader.h"

#include <memory>
#include <set>

#include "data/loader/dataset_loader.h"
#include "data/loader/mixture_loader.h"
#include "data/loader/shard_cache.h"
#include "data/loader/synthetic.h"
#include "data/loader/token_file.h"
#include "util/error.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/permutation.h"

namespace ft {
namespace {

// Shared bookkeeping: which global samples this rank reads for the next step.
class RankSliceLoader : public DataLoader {
 public:
  RankSliceLoader(const BatchSpec& t, int64_t dp_rank, int64_t dp_size)
      : global_batch_(t.batch_size), seq_len_(t.seq_len), seed_(t.seed), chunks_(t.chunks) {
    if (global_batch_ % dp_size != 0) {
      throw Error(
          fmt::format("train.batch_size = {} is not divisible by the {} data-parallel ranks", global_batch_, dp_size),
          fmt::format("use a batch size that is a multiple of {}", dp_size));
    }
    local_ = global_batch_ / dp_size;
    first_ = dp_rank * local_;
  }

  Batch next() override {
    Batch b;
    b.batch = local_;
    b.seq_len = seq_len_;
    b.chunks = chunks_;
    b.tokens.resize(static_cast<size_t>(local_ * (seq_len_ + 1)));
    for (int64_t i = 0; i < local_; ++i)
      for (auto [begin, end] : read_ranges(chunks_, seq_len_))
        read(state_.next_sample + first_ + i, begin, end, b.tokens.data() + i * (seq_len_ + 1));
    state_.next_sample += global_batch_;
    return b;
  }
  LoaderState state() const override { return state_; }
  void restore(const LoaderState& s) override { state_ = s; }

 protected:
  // Tokens [begin, end) of sample global_index into row[begin, end).
  virtual void read(int64_t global_index, int64_t begin, int64_t end, int32_t* row) = 0;
  int64_t global_batch_, seq_len_;
  uint64_t seed_;
  SampleChunks chunks_;
  int64_t local_ = 0, first_ = 0;
  LoaderState state_;
};

class SyntheticLoader final : public RankSliceLoader {
 public:
  SyntheticLoader(const BatchSpec& t, int64_t vocab, int64_t r, int64_t R, Split split)
      : RankSliceLoader(t, r, R), vocab_(vocab), split_(static_cast<int>(split)) {}
  std::string describe() const override {
    return fmt::format("synthetic progressions mod {} ({})", vocab_, split_ ? "validation" : "train");
  }

 private:
  void read(int64_t g, int64_t begin, int64_t end, int32_t* row) override {
    synthetic_sample(row, begin, end, vocab_, seed_, split_, g);
  }
  int64_t vocab_;
  int split_;
};

class TokenFileLoader final : public RankSliceLoader {
 public:
  TokenFileLoader(const DataConfig& d, const BatchSpec& t, int64_t vocab, int64_t r, int64_t R, Split split)
      : RankSliceLoader(t, r, R), file_(d.path, d.token_dtype), split_(split) {
    int64_t windows = (file_.num_tokens() - 1) / seq_len_;
    int64_t val = static_cast<int64_t>(static_cast<double>(windows) * d.val_fraction);
    if (d.val_fraction > 0 && val == 0) val = 1;
    first_window_ = split == Split::kTrain ? 0 : windows - val;
    num_windows_ = split == Split::kTrain ? windows - val : val;
    if (num_windows_ <= 0) {
      throw Error(fmt::format("token file {} holds {} tokens: too few for one {} sequence of {} + 1 tokens", d.path,
                              file_.num_tokens(), split == Split::kTrain ? "training" : "validation", seq_len_),
                  "use a longer file, a shorter train.seq_len or a smaller data.val_fraction");
    }
    uint32_t mx = file_.max_token();
    if (static_cast<int64_t>(mx) >= vocab) {
      throw Error(fmt::format("token file {} holds token id {} but model.vocab_size = {}", d.path, mx, vocab),
                  "set model.vocab_size above the largest token id");
    }
  }
  std::string describe() const override {
    return fmt::format("{} ({} {} windows of {} tokens)", file_.path(), num_windows_,
                       split_ == Split::kTrain ? "train" : "validation", seq_len_);
  }

 private:
  void read(int64_t g, int64_t begin, int64_t end, int32_t* row) override {
    int64_t epoch = g / num_windows_;
    uint64_t key = mix64(seed_ ^ mix64(static_cast<uint64_t>(epoch)));
    int64_t w = first_window_ + static_cast<int64_t>(permute_index(static_cast<uint64_t>(g % num_windows_),
                                                                   static_cast<uint64_t>(num_windows_), key));
    for (int64_t t = begin; t < end; ++t) row[t] = file_.at(w * seq_len_ + t);
  }
  TokenFile file_;
  Split split_;
  int64_t first_window_ = 0, num_windows_ = 0;
};

std::string cache_root(const DataConfig& data, const BatchSpec& train, Split split, int64_t dp_rank) {
  std::string root = data.cache_dir.empty() ? train.run_dir + "/data-cache" : data.cache_dir;
  return fmt::format("{}/{}-dp{}", root, split == Split::kTrain ? "train" : "validation", dp_rank);
}

DatasetLoaderOptions dataset_options(const DataConfig& data, const BatchSpec& train, int64_t vocab, int64_t dp_rank,
                                     int64_t dp_size, Split split, const std::string& path) {
  DatasetLoaderOptions o;
  o.dir = path;
  o.split = split;
  o.seq_len = train.seq_len;
  o.global_batch = train.batch_size;
  o.seed = train.seed;
  o.dp_rank = dp_rank;
  o.dp_size = dp_size;
  o.model_vocab = vocab;
  o.chunks = train.chunks;
  o.prefetch = static_cast<int>(data.prefetch);
  o.verify = data.verify;
  o.cache_dir = cache_root(data, train, split, dp_rank);
  o.cache_bytes = static_cast<uint64_t>(data.cache_bytes);
  o.store.gcs_endpoint = data.endpoint;
  o.store.s3_endpoint = data.endpoint;
  return o;
}

}  // namespace

std::vector<ValidationSource> make_validation_sources(const DataConfig& data, const BatchSpec& train, int64_t vocab,
                                                      int64_t dp_rank, int64_t dp_size) {
  std::vector<ValidationSource> out;
  if (data.source != DataSource::kDataset) return out;
  std::vector<MixtureSource> sources;
  if (!data.mixture.empty()) {
    sources = parse_mixture(data.mixture, data.path);
  } else {
    DatasetLoaderOptions o = dataset_options(data, train, vocab, dp_rank, dp_size, Split::kValidation, data.path);
    std::set<std::string> langs;
    for (const ShardInfo& s : load_dataset_manifest(data.path, o.store).validation.shards)
      if (!s.language.empty() && s.tokens > 0) langs.insert(s.language);
    if (langs.size() < 2) return out;
    for (const std::string& l : langs) sources.push_back({l, data.path, l, 0.0});
  }
  for (const MixtureSource& s : sources) {
    DatasetLoaderOptions o = dataset_options(data, train, vocab, dp_rank, dp_size, Split::kValidation, s.path);
    o.language = s.language;
    o.cache_dir += "/" + s.name;
    try {
      out.push_back({s.name, data.mixture.empty() ? 0.0 : s.weight, std::make_unique<DatasetLoader>(o)});
    } catch (const Error& e) {
      if (std::string(e.what()).find("fewer than the global batch") == std::string::npos) throw;
      log_warn("validation of source \"{}\" is skipped: {}", s.name, e.what());
    }
  }
  return out;
}

std::unique_ptr<DataLoader> make_loader(const DataConfig& data, const BatchSpec& train, int64_t vocab, int64_t dp_rank,
                                        int64_t dp_size, Split split) {
  switch (data.source) {
    case DataSource::kSynthetic:
      return std::make_unique<SyntheticLoader>(train, vocab, dp_rank, dp_size, split);
    case DataSource::kTokenFile:
      return std::make_unique<TokenFileLoader>(data, train, vocab, dp_rank, dp_size, split);
    case DataSource::kDataset: {
      DatasetLoaderOptions o = dataset_options(data, train, vocab, dp_rank, dp_size, split, data.path);
      if (!data.mixture.empty()) {
        if (split == Split::kValidation) return nullptr;
        o.cache_dir = cache_root(data, train, split, dp_rank);
        return std::make_unique<MixtureLoader>(parse_mixture(data.mixture, data.path), o);
      }
      return std::make_unique<DatasetLoader>(o);
    }
  }
  throw Error("unknown data.source");
}

}  // namespace ft

#include "data/loader/dataset_loader.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "data/loader/mixture.h"
#include "util/error.h"
#include "util/log.h"
#include "util/strings.h"

namespace ft {

DatasetLoader::DatasetLoader(const DatasetLoaderOptions& opt)
    : opt_(opt),
      prefetcher_(
          opt.prefetch, opt.global_batch, [this](int64_t s) { return build(s); }, opt.dir) {
  if (opt.dp_size < 1 || opt.dp_rank < 0 || opt.dp_rank >= opt.dp_size) {
    throw Error(fmt::format("data-parallel rank {} of {} is out of range", opt.dp_rank, opt.dp_size));
  }
  if (opt.global_batch % opt.dp_size != 0) {
    throw Error(fmt::format("train.batch_size = {} is not divisible by the {} data-parallel ranks", opt.global_batch,
                            opt.dp_size),
                fmt::format("use a batch size that is a multiple of {}", opt.dp_size));
  }
  const bool remote = ObjectUrl::is_object_url(opt.dir);
  if (remote) {
    if (opt.cache_dir.empty())
      throw Error(fmt::format("{}: a dataset URL needs a cache directory", opt.dir), "set data.cache_dir");
    cache_ = std::make_unique<ShardCache>(ShardCacheOptions{.url = opt.dir,
                                                            .dir = opt.cache_dir,
                                                            .capacity_bytes = opt.cache_bytes,
                                                            .verify = opt.verify,
                                                            .store = opt.store});
    manifest_ = cache_->manifest();  // the tokenizer's hash was checked on the way in
  } else {
    manifest_ = DatasetManifest::load(opt.dir);
    manifest_.check_tokenizer(opt.dir);
  }
  if (opt.model_vocab > 0 && manifest_.vocab_size > opt.model_vocab) {
    throw Error(fmt::format("{}: the dataset's tokenizer has {} tokens but model.vocab_size = {}", opt.dir,
                            manifest_.vocab_size, opt.model_vocab),
                fmt::format("set model.vocab_size = {} (or larger)", manifest_.vocab_size));
  }
  const SplitInfo& si = split_info();
  const char* split_name = opt.split == Split::kTrain ? "train" : "validation";
  std::set<std::string> languages;
  for (size_t i = 0; i < si.shards.size(); ++i) {
    if (!si.shards[i].language.empty()) languages.insert(si.shards[i].language);
    if (opt.language.empty() || si.shards[i].language == opt.language) subset_.push_back(static_cast<int64_t>(i));
  }
  if (subset_.empty()) {
    std::string have;
    for (const std::string& l : languages) have += (have.empty() ? "" : ", ") + l;
    throw Error(fmt::format("{}: the {} split has no shards of language \"{}\" (it has: {})", opt.dir, split_name,
                            opt.language, have.empty() ? "no language tags" : have),
                "choose one of the dataset's languages; datasets prepared before languages were recorded need "
                "`fluxtrain prepare` again");
  }
  std::vector<uint64_t> tokens;
  for (int64_t k = 0; k < static_cast<int64_t>(subset_.size()); ++k) tokens.push_back(info(k).tokens);
  plan_ = std::make_unique<SequencePlan>(
      tokens, opt.seq_len, opt.global_batch, opt.seed, opt.split == Split::kTrain,
      fmt::format("{} ({} split{})", opt.dir, split_name, opt.language.empty() ? "" : ", language " + opt.language));
  local_ = opt.global_batch / opt.dp_size;
  first_pos_ = opt.dp_rank * local_;
  auto [first, last] = plan_->shard_range(opt.dp_rank, opt.dp_size);
  first_shard_ = first;
  last_shard_ = last;
  if (cache_) {
    uint64_t range = 0, largest = 0;
    for (int64_t s = first; s < last; ++s) {
      range += info(s).bytes;
      largest = std::max(largest, info(s).bytes);
    }
    if (largest * 2 > opt.cache_bytes) {
      throw Error(fmt::format("data.cache_bytes = {} cannot hold two of this rank's shards of {} ({} each at most)",
                              opt.cache_bytes, opt.dir, human_bytes(static_cast<double>(largest))),
                  fmt::format("set data.cache_bytes to at least {}", 2 * largest));
    }
    if (range > opt.cache_bytes) {
      log_warn(
          "{}: this rank's {} shards hold {}, more than data.cache_bytes = {}: shards will be fetched again "
          "after eviction (raise data.cache_bytes to keep them)",
          opt.dir, last - first, human_bytes(static_cast<double>(range)),
          human_bytes(static_cast<double>(opt.cache_bytes)));
    }
    // Ahead of use: the next batches' shards first, then the rest of the range in order.
    std::vector<int64_t> order = shards_needed(state_.next_sample, std::max(2, opt.prefetch + 1));
    for (int64_t s = first; s < last; ++s)
      if (std::find(order.begin(), order.end(), s) == order.end()) order.push_back(s);
    std::vector<ShardCache::ShardId> ids;
    for (int64_t s : order) ids.emplace_back(opt.split, subset_[static_cast<size_t>(s)]);
    cache_->prefetch(ids);
  }
  for (int64_t s = first; s < last && !cache_; ++s) {
    const ShardInfo& info = this->info(s);
    std::string path = (std::filesystem::path(opt.dir) / info.file).string();
    auto shard = std::make_shared<const Shard>(path);
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
  prefetcher_.start(state_.next_sample);
}

DatasetLoader::~DatasetLoader() {
  prefetcher_.stop();
}

std::shared_ptr<const Shard> DatasetLoader::shard(int64_t s) const {
  FT_CHECK(s >= first_shard_ && s < last_shard_, "shard {} outside this rank's range [{}, {})", s, first_shard_,
           last_shard_);
  if (cache_) return cache_->shard(opt_.split, subset_[static_cast<size_t>(s)]);
  return shards_[static_cast<size_t>(s - first_shard_)];
}

std::vector<int64_t> DatasetLoader::shards_needed(int64_t first_sample, int64_t n) const {
  std::vector<int64_t> out;
  for (int64_t k = 0; k < n; ++k) {
    for (int64_t i = 0; i < local_; ++i) {
      int64_t s = plan_->locate(first_sample + k * opt_.global_batch + first_pos_ + i).shard;
      if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
    }
  }
  return out;
}

std::string DatasetLoader::describe() const {
  return fmt::format(
      "{} ({} split: {} sequences of {} + 1 tokens, {} steps per epoch; rank {} of {} reads shards "
      "[{}, {}) of {})",
      opt_.dir, opt_.split == Split::kTrain ? "train" : "validation", plan_->num_sequences(), opt_.seq_len,
      plan_->steps_per_epoch(), opt_.dp_rank, opt_.dp_size, first_shard_, last_shard_, subset_.size());
}

double DatasetLoader::chars_per_token() const {
  if (opt_.language.empty()) return split_info().chars_per_token();
  uint64_t chars = 0, tokens = 0;
  for (int64_t k = 0; k < static_cast<int64_t>(subset_.size()); ++k)
    chars += info(k).characters, tokens += info(k).tokens;
  return tokens ? static_cast<double>(chars) / static_cast<double>(tokens) : 0;
}

double DatasetLoader::bytes_per_token() const {
  if (opt_.language.empty()) return split_info().bytes_per_token();
  auto it = manifest_.languages.find(opt_.language);  // the language's ratio over both splits
  if (it == manifest_.languages.end() || it->second.tokens == 0) return 0;
  return static_cast<double>(it->second.bytes) / static_cast<double>(it->second.tokens);
}

Batch DatasetLoader::build(int64_t first_sample) const {
  Batch b;
  b.batch = local_;
  b.seq_len = opt_.seq_len;
  b.chunks = opt_.chunks;
  b.tokens.resize(static_cast<size_t>(local_ * (opt_.seq_len + 1)));
  for (int64_t i = 0; i < local_; ++i)
    copy_sample(plan_->locate(first_sample + first_pos_ + i), b.tokens.data() + i * (opt_.seq_len + 1));
  return b;
}

void DatasetLoader::copy_sample(const SequencePlan::Location& loc, int32_t* row) const {
  const ShardView& v = shard(loc.shard)->view();
  for (auto [begin, end] : read_ranges(opt_.chunks, opt_.seq_len)) {
    v.copy_tokens(loc.first_token + static_cast<uint64_t>(begin), static_cast<uint64_t>(end - begin), row + begin);
    bytes_read_ += (end - begin) * static_cast<int64_t>(manifest_.token_bytes);
  }
}

Batch DatasetLoader::next() {
  BatchPrefetcher::Taken t = prefetcher_.take(state_.next_sample);
  last_wait_s_ = t.wait_s;
  state_.next_sample += opt_.global_batch;
  state_.epoch = plan_->epoch_of(state_.next_sample);
  return std::move(t.batch);
}

void DatasetLoader::restore(const LoaderState& s) {
  if (s.next_sample < 0 || s.next_sample % opt_.global_batch != 0) {
    throw Error(fmt::format("loader state: sample index {} is not a multiple of the global batch {}", s.next_sample,
                            opt_.global_batch),
                "resume with the train.batch_size the checkpoint was written with");
  }
  // The checkpoint was written under data.mixture and this run has none: the order changes here
  // (as adding a mixture at a resume is said, in MixtureLoader::restore).
  if (!s.mixture.empty() && s.next_sample > 0) {
    std::string was;
    for (const MixtureSegment& seg : mixture_history_from_json(s.mixture))
      if (seg.from_sample <= s.next_sample) {
        was.clear();
        for (auto& [n, w] : seg.weights) was += fmt::format("{}{}={}", was.empty() ? "" : ", ", n, w);
      }
    log_warn(
        "data.mixture: the checkpoint was written under a mixture ({}), this run has none: from sample {} on, "
        "the data order is data.path's own, not the mixture's",
        was, s.next_sample);
  }
  prefetcher_.stop();
  state_.next_sample = s.next_sample;
  state_.epoch = plan_->epoch_of(s.next_sample);
  prefetcher_.start(state_.next_sample);
}

}  // namespace ft

#include "data/loader/mixture_loader.h"

#include "util/error.h"
#include "util/log.h"

namespace ft {

MixtureLoader::MixtureLoader(std::vector<MixtureSource> sources, const DatasetLoaderOptions& base)
    : sources_(std::move(sources)),
      base_(base),
      prefetcher_(
          base.prefetch, base.global_batch, [this](int64_t s) { return build(s); }, "data.mixture") {
  FT_CHECK(!sources_.empty(), "a mixture needs a source");
  for (const MixtureSource& s : sources_) {
    DatasetLoaderOptions o = base;
    o.dir = s.path;
    o.language = s.language;
    o.prefetch = 0;  // batches are prefetched here
    if (!base.cache_dir.empty()) o.cache_dir = base.cache_dir + "/" + s.name;
    sources_loaders_.push_back(std::make_unique<DatasetLoader>(o));
    if (sources_loaders_.back()->tokenizer_hash() != sources_loaders_.front()->tokenizer_hash()) {
      throw Error(fmt::format("data.mixture: source \"{}\" ({}) was tokenized with tokenizer {}, source \"{}\" with {}",
                              s.name, s.path, hex64(sources_loaders_.back()->tokenizer_hash()), sources_.front().name,
                              hex64(sources_loaders_.front()->tokenizer_hash())),
                  "prepare every source with the same tokenizer (fluxtrain prepare --tokenizer MODEL)");
    }
  }
  local_ = base.global_batch / base.dp_size;
  first_pos_ = base.dp_rank * local_;
  MixtureSegment first;
  for (const MixtureSource& s : sources_) first.weights[s.name] = s.weight;
  rebuild_plan({first});
  prefetcher_.start(state_.next_sample);
}

MixtureLoader::~MixtureLoader() {
  prefetcher_.stop();
}

void MixtureLoader::rebuild_plan(std::vector<MixtureSegment> history) {
  std::vector<std::string> names;
  std::vector<const SequencePlan*> lanes;
  for (size_t i = 0; i < sources_.size(); ++i) {
    names.push_back(sources_[i].name);
    lanes.push_back(&sources_loaders_[i]->plan());
  }
  plan_ = std::make_unique<MixturePlan>(names, lanes, base_.global_batch, base_.seed, std::move(history));
  state_.mixture = mixture_history_to_json(plan_->history());
}

LoaderState MixtureLoader::state() const {
  return state_;
}

uint64_t MixtureLoader::fetched_bytes() const {
  uint64_t n = 0;
  for (auto& l : sources_loaders_) n += l->fetched_bytes();
  return n;
}

std::string MixtureLoader::describe() const {
  std::string s = "mixture of";
  for (size_t i = 0; i < sources_.size(); ++i) {
    s += fmt::format("{} {} (weight {}, {}/{} of each {} samples: {})", i ? ";" : "", sources_[i].name,
                     sources_[i].weight, plan_->quota(state_.next_sample, static_cast<int>(i)), plan_->period(),
                     plan_->period(), sources_loaders_[i]->describe());
  }
  return s;
}

Batch MixtureLoader::build(int64_t first_sample) const {
  Batch b;
  b.batch = local_;
  b.seq_len = base_.seq_len;
  b.chunks = base_.chunks;
  b.tokens.resize(static_cast<size_t>(local_ * (base_.seq_len + 1)));
  for (int64_t i = 0; i < local_; ++i) {
    MixturePlan::Pick p = plan_->pick(first_sample + first_pos_ + i);
    const DatasetLoader& src = *sources_loaders_[static_cast<size_t>(p.source)];
    src.copy_sample(src.plan().locate_sequence(p.sequence), b.tokens.data() + i * (base_.seq_len + 1));
  }
  return b;
}

Batch MixtureLoader::next() {
  BatchPrefetcher::Taken t = prefetcher_.take(state_.next_sample);
  last_wait_s_ = t.wait_s;
  state_.next_sample += base_.global_batch;
  return std::move(t.batch);
}

void MixtureLoader::restore(const LoaderState& s) {
  if (s.next_sample < 0 || s.next_sample % base_.global_batch != 0) {
    throw Error(fmt::format("loader state: sample index {} is not a multiple of the global batch {}", s.next_sample,
                            base_.global_batch),
                "resume with the train.batch_size the checkpoint was written with");
  }
  prefetcher_.stop();
  std::vector<MixtureSegment> history;
  MixtureSegment now;
  for (const MixtureSource& src : sources_) now.weights[src.name] = src.weight;
  if (!s.mixture.empty()) {
    history = mixture_history_from_json(s.mixture);
    while (!history.empty() && history.back().from_sample > s.next_sample) history.pop_back();  // rolled back past it
  }
  if (history.empty()) {
    if (s.next_sample > 0) {
      log_warn(
          "data.mixture: the checkpoint records no mixture; the mixture's order starts at sample {} as if it "
          "had been in force from the start",
          s.next_sample);
    }
    now.from_sample = 0;
    history.push_back(now);
  } else if (history.back().weights != now.weights) {
    now.from_sample = s.next_sample;
    std::string was, is;
    for (auto& [n, w] : history.back().weights) was += fmt::format("{}{}={}", was.empty() ? "" : ", ", n, w);
    for (auto& [n, w] : now.weights) is += fmt::format("{}{}={}", is.empty() ? "" : ", ", n, w);
    log_info("data.mixture: weights change at step {} (sample {}): {} -> {}", s.next_sample / base_.global_batch,
             s.next_sample, was, is);
    if (history.back().from_sample == s.next_sample) history.pop_back();
    history.push_back(now);
  }
  rebuild_plan(std::move(history));
  state_.next_sample = s.next_sample;
  state_.epoch = s.epoch;
  prefetcher_.start(state_.next_sample);
}

}  // namespace ft

#include "data/loader/sequence_plan.h"

#include <algorithm>

#include "util/error.h"
#include "util/hash.h"
#include "util/permutation.h"

namespace ft {

SequencePlan::SequencePlan(const std::vector<uint64_t>& shard_tokens, int64_t seq_len, int64_t global_batch,
                           uint64_t seed, bool shuffle, const std::string& what)
    : seq_len_(seq_len), batch_(global_batch), seed_(seed), shuffle_(shuffle) {
  FT_CHECK(seq_len > 0 && global_batch > 0, "seq_len {} batch {}", seq_len, global_batch);
  seq_prefix_.reserve(shard_tokens.size() + 1);
  seq_prefix_.push_back(0);
  for (uint64_t t : shard_tokens) {
    uint64_t n = t > static_cast<uint64_t>(seq_len) ? (t - 1) / static_cast<uint64_t>(seq_len) : 0;
    seq_prefix_.push_back(seq_prefix_.back() + n);
  }
  total_ = seq_prefix_.back();
  steps_per_epoch_ = static_cast<int64_t>(total_ / static_cast<uint64_t>(global_batch));
  if (steps_per_epoch_ < 1) {
    throw Error(fmt::format("{} holds {} sequences of {} + 1 tokens, fewer than the global batch of {}", what, total_,
                            seq_len, global_batch),
                "use more data (fluxtrain prepare), a shorter train.seq_len or a smaller train.batch_size");
  }
}

uint64_t SequencePlan::lane_begin(int64_t j) const {
  // j·S/B without overflow for any realistic S (< 2^63 / B).
  return static_cast<uint64_t>((static_cast<unsigned __int128>(j) * total_) / static_cast<uint64_t>(batch_));
}

uint64_t SequencePlan::sequence_of(int64_t g) const {
  FT_CHECK(g >= 0, "negative sample index {}", g);
  int64_t k = g / batch_, j = g % batch_;
  int64_t epoch = k / steps_per_epoch_, p = k % steps_per_epoch_;
  uint64_t begin = lane_begin(j), size = lane_begin(j + 1) - begin;
  if (!shuffle_) return begin + static_cast<uint64_t>(p);
  uint64_t key = mix64(seed_ ^ mix64(static_cast<uint64_t>(epoch) * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(j)));
  return begin + permute_index(static_cast<uint64_t>(p), size, key);
}

SequencePlan::Location SequencePlan::locate_sequence(uint64_t seq) const {
  FT_CHECK(seq < total_, "sequence {} of {}", seq, total_);
  auto it = std::upper_bound(seq_prefix_.begin(), seq_prefix_.end(), seq);
  int64_t shard = static_cast<int64_t>(it - seq_prefix_.begin()) - 1;
  return {shard, (seq - seq_prefix_[static_cast<size_t>(shard)]) * static_cast<uint64_t>(seq_len_)};
}

std::pair<int64_t, int64_t> SequencePlan::shard_range_of_positions(int64_t pos_begin, int64_t pos_end) const {
  uint64_t first_seq = lane_begin(pos_begin), end_seq = lane_begin(pos_end);
  if (end_seq <= first_seq) return {0, 0};
  int64_t first = locate_sequence(first_seq).shard;
  int64_t last = locate_sequence(end_seq - 1).shard + 1;
  return {first, last};
}

}  // namespace ft

// Where each training sample of a dataset split comes from: the global order as arithmetic.
//
// A split's shards hold S sequences of seq_len + 1 tokens: shard s contributes
// floor((tokens_s - 1) / seq_len) windows at stride seq_len (a window never crosses a shard).
// Sequences are numbered in shard order. With global batch B they are cut into B "lanes" of
// contiguous sequences, lane j = [j·S/B, (j+1)·S/B). Batch position j always draws from lane j:
//
//   global sample g → step k = g / B, position j = g % B, epoch e = k / E, p = k % E
//   sequence = lane_begin(j) + permute(p, lane_size(j), key(seed, e, j))     (train)
//   sequence = lane_begin(j) + p                                              (validation)
//
// where E = floor(S / B) steps per epoch (the smallest lane). So the order is a pure function
// of (seed, epoch, g); data-parallel rank r of R (positions [r·B/R, (r+1)·B/R)) only ever reads
// the contiguous sequence range of its lanes, hence a contiguous range of shards, for every R
// that divides B; and resuming under another R continues the same order.
//
//   SequencePlan plan(shard_tokens, seq_len, B, seed, /*shuffle=*/true);
//   SequencePlan::Location loc = plan.locate(g);       // shard and first token of sample g
//   auto [first, last] = plan.shard_range(rank, world); // shards [first, last) of this rank
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ft {

class SequencePlan {
 public:
  // Throws ft::Error when the split holds fewer sequences than the global batch.
  SequencePlan(const std::vector<uint64_t>& shard_tokens, int64_t seq_len, int64_t global_batch, uint64_t seed,
               bool shuffle, const std::string& what);

  struct Location {
    int64_t shard = 0;
    uint64_t first_token = 0;  // inside the shard
  };
  uint64_t sequence_of(int64_t global_sample) const;
  Location locate_sequence(uint64_t sequence) const;
  Location locate(int64_t global_sample) const { return locate_sequence(sequence_of(global_sample)); }

  // Shards [first, last) touched by batch positions [pos_begin, pos_end).
  std::pair<int64_t, int64_t> shard_range_of_positions(int64_t pos_begin, int64_t pos_end) const;
  std::pair<int64_t, int64_t> shard_range(int64_t rank, int64_t world) const {
    return shard_range_of_positions(rank * batch_ / world, (rank + 1) * batch_ / world);
  }

  uint64_t num_sequences() const { return total_; }
  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  int64_t epoch_of(int64_t global_sample) const { return global_sample / batch_ / steps_per_epoch_; }
  uint64_t lane_begin(int64_t j) const;

 private:
  std::vector<uint64_t> seq_prefix_;  // first sequence of each shard; back() = total
  int64_t seq_len_, batch_;
  uint64_t seed_;
  bool shuffle_;
  uint64_t total_ = 0;
  int64_t steps_per_epoch_ = 0;
};

}  // namespace ft

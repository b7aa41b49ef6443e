// Which tokens of each sample a rank reads. Without context parallelism: all seq_len + 1 of them
// (inputs [0, seq_len), targets [1, seq_len]). Under it (parallel.cp > 1) a rank trains on two
// zig-zag chunks [b, e) of each sample (model/context_split.h), so its loader reads only tokens
// [b, e + 1) of each — the chunk and the one target past it — and leaves the rest of the batch row
// 0. The chunks of the cp ranks of a replica together cover [0, seq_len] (a target token past one
// rank's chunk is the first token of another's).
//
//   SampleChunks c{{0, 4}, {12, 16}};                 // cp rank 0 of 2 at seq_len 16
//   for (auto [b, e] : read_ranges(c, 16)) ...        // [0, 5), [12, 17)
//   int64_t n = tokens_per_sample(c, 16);             // 10 of the 17
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace ft {

using SampleChunks = std::vector<std::pair<int64_t, int64_t>>;  // [begin, end) token positions; empty = whole

// The [begin, end) token ranges of one sample row (seq_len + 1 tokens) to read.
inline SampleChunks read_ranges(const SampleChunks& chunks, int64_t seq_len) {
  if (chunks.empty()) return {{0, seq_len + 1}};
  SampleChunks out;
  for (auto [b, e] : chunks) out.emplace_back(b, e + 1);
  return out;
}

inline int64_t tokens_per_sample(const SampleChunks& chunks, int64_t seq_len) {
  int64_t n = 0;
  for (auto [b, e] : read_ranges(chunks, seq_len)) n += e - b;
  return n;
}

// Calls f(position) once for every token of a sample whose position this rank owns: the tokens of
// its chunks, and the sample's last token (position seq_len, a target only) on the rank whose
// chunk ends there. Over the cp ranks of a replica every position 0..seq_len comes once.
template <typename F>
void for_each_owned_position(const SampleChunks& chunks, int64_t seq_len, F&& f) {
  if (chunks.empty()) {
    for (int64_t p = 0; p <= seq_len; ++p) f(p);
    return;
  }
  for (auto [b, e] : chunks) {
    for (int64_t p = b; p < e; ++p) f(p);
    if (e == seq_len) f(seq_len);
  }
}

}  // namespace ft

// The built-in synthetic task: each sequence is an arithmetic progression modulo the vocabulary,
// token_t = (start + t · stride) mod V, with start and stride drawn per sample from a hash of
// (seed, split, sample index). A model must infer the stride from context: the loss falls
// from ln V towards 0 as it learns, so the task is learnable yet never trivial at step 0.
#pragma once

#include <cstdint>

namespace ft {

// Tokens [begin, end) of the sample into row[begin, end) (a whole sample: 0, seq_len + 1).
void synthetic_sample(int32_t* row, int64_t begin, int64_t end, int64_t vocab_size, uint64_t seed, int split,
                      int64_t sample_index);

}  // namespace ft

#include "data/loader/synthetic.h"

#include "util/hash.h"

namespace ft {

void synthetic_sample(int32_t* row, int64_t begin, int64_t end, int64_t vocab_size, uint64_t seed, int split,
                      int64_t sample_index) {
  uint64_t h = mix64(seed ^ mix64(static_cast<uint64_t>(sample_index) * 2 + static_cast<uint64_t>(split)));
  int64_t max_stride = vocab_size < 16 ? vocab_size - 1 : 8;
  int64_t start = static_cast<int64_t>(h % static_cast<uint64_t>(vocab_size));
  int64_t stride = 1 + static_cast<int64_t>((h >> 32) % static_cast<uint64_t>(max_stride));
  for (int64_t t = begin; t < end; ++t) row[t] = static_cast<int32_t>((start + t * stride) % vocab_size);
}

}  // namespace ft

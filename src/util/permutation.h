// A keyed pseudo-random permutation of [0, n), evaluated one index at a time in O(1) memory:
// a 4-round Feistel network on the next power of four, with cycle-walking back into range.
// Data order is "permute(index, n, hash(seed, epoch))", a pure function of its arguments.
#pragma once

#include <cstdint>

#include "util/hash.h"

namespace ft {

inline uint64_t permute_index(uint64_t index, uint64_t n, uint64_t key) {
  if (n <= 1) return 0;
  int bits = 2;
  while ((uint64_t{1} << bits) < n) bits += 2;
  int half = bits / 2;
  uint64_t mask = (uint64_t{1} << half) - 1;
  uint64_t x = index;
  do {
    uint64_t l = x >> half, r = x & mask;
    for (int round = 0; round < 4; ++round) {
      uint64_t f = mix64(r ^ mix64(key + static_cast<uint64_t>(round))) & mask;
      uint64_t nl = r;
      r = l ^ f;
      l = nl;
    }
    x = (l << half) | r;
  } while (x >= n);
  return x;
}

}  // namespace ft

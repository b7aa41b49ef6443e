// Saturating int64 arithmetic for sizes that can be asked for but never built: a planner or memory
// estimate fed absurd shapes gets INT64_MAX ("does not fit") instead of a signed overflow.
//   int64_t bytes = sat_add(sat_mul(layers, block_bytes), head_bytes);
#pragma once

#include <cstdint>
#include <limits>

namespace ft {

inline int64_t sat_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}

inline int64_t sat_add(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}

}  // namespace ft

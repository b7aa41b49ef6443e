// divisors(n): every divisor of n > 0, ascending (the planner's candidate sizes for a mesh axis).
#pragma once

#include <cstdint>
#include <vector>

namespace ft::plan {

// Pairs (i, n / i) up to the square root: a hint about a 2^40-token sequence stays instant.
inline std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> low, high;
  for (int64_t i = 1; i <= n / i; ++i) {
    if (n % i != 0) continue;
    low.push_back(i);
    if (i != n / i) high.push_back(n / i);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

}  // namespace ft::plan

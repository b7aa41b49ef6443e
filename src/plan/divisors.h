// divisors(n): every divisor of n > 0, ascending (the planner's candidate sizes for a mesh axis).
#pragma once

#include <cstdint>
#include <vector>

namespace ft::plan {

inline std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> d;
  for (int64_t i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

}  // namespace ft::plan

// Wall-clock seconds from a monotonic clock.
#pragma once

#include <chrono>

namespace ft {

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace ft

// Wall-clock seconds from a monotonic clock; Unix time (seconds, for times compared across
// processes); CPU seconds this process has used (all threads);
// the current UTC time as an ISO 8601 string.
#pragma once

#include <time.h>

#include <chrono>
#include <ctime>
#include <string>

namespace ft {

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double unix_time_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// On a shared machine a step's CPU time, unlike its wall time, does not grow while other
// processes hold the cores.
inline double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// "2025-01-31T12:00:00Z"
inline std::string utc_timestamp() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace ft

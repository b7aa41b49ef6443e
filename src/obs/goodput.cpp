#include "obs/goodput.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>

namespace ft::obs {
namespace {

double now_unix() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double env_or(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  double d = std::strtod(v, &end);
  return end && *end == '\0' && std::isfinite(d) ? d : fallback;
}

}  // namespace

Goodput Goodput::from_env() {
  return Goodput(env_or("FLUXTRAIN_JOB_STARTED_AT", now_unix()), std::max(0.0, env_or("FLUXTRAIN_PRODUCTIVE_S", 0)));
}

double Goodput::ratio(double now) const {
  const double wall = now - started_;
  if (!(wall > 0)) return 0;
  return std::clamp(productive_ / wall, 0.0, 1.0);
}

double productive_seconds(const std::vector<MetricsRecord>& records, int64_t up_to_step) {
  double s = 0;
  for (const MetricsRecord& r : records) {
    if (up_to_step >= 0 && r.step > up_to_step) continue;
    if (std::isfinite(r.step_s) && !(r.skipped > 0)) s += r.step_s;
  }
  return s;
}

}  // namespace ft::obs

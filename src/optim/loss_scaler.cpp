#include "optim/loss_scaler.h"

#include <algorithm>
#include <cmath>

namespace ft {

LossScaler::LossScaler(double init_scale, double growth_factor, double backoff_factor, int64_t growth_interval,
                       double min_scale, double max_scale)
    : scale_(init_scale),
      growth_(growth_factor),
      backoff_(backoff_factor),
      interval_(growth_interval),
      min_(min_scale),
      max_(max_scale) {}

bool LossScaler::update(bool found_inf) {
  if (found_inf) {
    scale_ = std::max(min_, scale_ * backoff_);
    good_ = 0;
    ++skipped_;
    return false;
  }
  if (++good_ >= interval_) {
    scale_ = std::min(max_, scale_ * growth_);
    good_ = 0;
  }
  return true;
}

void LossScaler::restore(double scale, int64_t clean_steps_in_a_row) {
  scale_ = std::clamp(scale, min_, max_);
  good_ = std::max<int64_t>(0, clean_steps_in_a_row);
}

bool has_inf_or_nan(const float* x, int64_t n) {
  bool bad = false;
#pragma omp parallel for reduction(|| : bad) schedule(static)
  for (int64_t i = 0; i < n; ++i) bad = bad || !std::isfinite(x[i]);
  return bad;
}

}  // namespace ft

// Dynamic loss scaling for fp16 training, device independent.
//
// The loss is multiplied by scale() before backward; after backward the caller reports whether
// any gradient overflowed (Inf/NaN). On overflow the step is skipped and the scale backs off;
// after growth_interval clean steps in a row the scale grows.
//
//   LossScaler s;                         // scale 2^16, ×2 every 2000 clean steps, ÷2 on overflow
//   loss_to_backward = loss * s.scale();
//   bool apply = s.update(found_inf);     // false → skip the optimizer step
//   grads *= 1 / s.scale_used();          // unscale (the scale this step's backward used)
#pragma once

#include <cstdint>

namespace ft {

class LossScaler {
 public:
  explicit LossScaler(double init_scale = 65536.0, double growth_factor = 2.0, double backoff_factor = 0.5,
                      int64_t growth_interval = 2000, double min_scale = 1.0, double max_scale = 16777216.0);

  double scale() const { return scale_; }
  // Updates the scale after a backward. Returns true when the optimizer step should be applied.
  bool update(bool found_inf);
  int64_t skipped_steps() const { return skipped_; }
  int64_t clean_steps_in_a_row() const { return good_; }
  double min_scale() const { return min_; }
  // Back to a saved state (a checkpoint's scale and clean-step count).
  void restore(double scale, int64_t clean_steps_in_a_row);

 private:
  double scale_, growth_, backoff_;
  int64_t interval_;
  double min_, max_;
  int64_t good_ = 0, skipped_ = 0;
};

// True when any of the n values is Inf or NaN.
bool has_inf_or_nan(const float* x, int64_t n);

}  // namespace ft

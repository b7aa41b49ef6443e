#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace ft {

LrSchedule::LrSchedule(const OptimConfig& o, int64_t total_steps)
    : lr(o.lr),
      min_lr(o.lr * o.min_lr_ratio),
      warmup(o.warmup_steps),
      decay(o.decay_steps > 0 ? o.decay_steps : std::max<int64_t>(total_steps - o.warmup_steps, 1)) {}

double LrSchedule::at(int64_t step) const {
  if (step < warmup) return lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  double progress = std::min(1.0, static_cast<double>(step - warmup) / static_cast<double>(decay));
  return min_lr + 0.5 * (lr - min_lr) * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace ft

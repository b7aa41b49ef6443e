// Learning-rate schedule: linear warm-up from 0 to lr over warmup_steps, then cosine decay to
// min_lr over decay_steps, then min_lr.
//
//   LrSchedule s{cfg.optim, cfg.train.steps};  double lr = s.at(step);   // step counts from 0
#pragma once

#include <cstdint>

#include "optim/optim_config.h"

namespace ft {

struct LrSchedule {
  double lr, min_lr;
  int64_t warmup, decay;

  LrSchedule(const OptimConfig& o, int64_t total_steps);
  double at(int64_t step) const;
};

}  // namespace ft

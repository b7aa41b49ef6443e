// OptimConfig (optim.*): the optimizer's and the learning-rate schedule's knobs.
#pragma once

#include <cstdint>

namespace ft {

class ConfigBinder;

struct OptimConfig {
  double lr = 3e-3;
  double min_lr_ratio = 0.1;  // end of the cosine decay, as a fraction of lr
  int64_t warmup_steps = 10;  // linear warm-up from 0
  int64_t decay_steps = 0;    // cosine decay length after warm-up; 0 = until train.steps
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;         // applied to matrices, not to norm weights
  double grad_clip = 1.0;            // global-norm clipping; 0 = off
  double loss_scale_init = 65536;    // fp16: the first dynamic loss scale
  int64_t loss_scale_window = 2000;  // fp16: clean steps in a row before the scale doubles

  void bind(ConfigBinder& b);
  void validate() const;
};

}  // namespace ft

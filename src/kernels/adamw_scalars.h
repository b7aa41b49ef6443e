// AdamwStepScalars: the values of one AdamW update that change from step to step — the learning
// rate, the bias corrections of the step count and the gradient's factor (clip coefficient over
// the loss scale). ops::adamw_step reads them from device memory, not by value, so that an update
// captured in a CUDA graph (train/step_graph.h) replays each step with that step's values: the
// host writes them into one small buffer (optim/adamw_optimizer.h copies it up from pinned
// memory), the launches stay the same. Computed once on the host, in double as PyTorch computes
// them in Python floats; every backend reads the same float values.
//
//   AdamwStepScalars s = adamw_step_scalars(lr, beta1, beta2, step, grad_scale);   // host
//   <s copied to device memory at dev_s>
//   ops::adamw_step(ctx, param, m, v, param_bf16, grad, n, dev_s, beta1, beta2, eps, weight_decay);
#pragma once

#include <cmath>
#include <cstdint>

namespace ft {

struct AdamwStepScalars {
  float lr;          // the learning rate: decoupled weight decay multiplies by 1 − lr · weight_decay
  float step_size;   // lr / (1 − beta1^step)
  float bc2_sqrt;    // sqrt(1 − beta2^step)
  float grad_scale;  // the gradient is multiplied by it first (clip coefficient / loss scale)
};

// step counts from 1.
inline AdamwStepScalars adamw_step_scalars(float lr, float beta1, float beta2, int64_t step, float grad_scale) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(step));
  return {lr, static_cast<float>(static_cast<double>(lr) / bc1), static_cast<float>(std::sqrt(bc2)), grad_scale};
}

}  // namespace ft

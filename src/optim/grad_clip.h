// Global-norm gradient clipping, as torch.nn.utils.clip_grad_norm_: when the global L2 norm of
// all gradients exceeds max_norm, every gradient is scaled by max_norm / (norm + 1e-6).
// The norm's sum of squares is computed locally; distributed callers sum it across ranks first.
#pragma once

#include <cstdint>

#include "tensor/exec_context.h"

namespace ft {

// Sum of squares of n gradients (double accumulation), on ctx's device, read back to the host.
double grad_sum_squares(const ExecContext& ctx, const float* grads, int64_t n);
// The factor to multiply gradients by (1 when no clipping is needed or max_norm == 0).
float clip_coefficient(double global_norm, double max_norm);

}  // namespace ft

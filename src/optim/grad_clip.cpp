#include "optim/grad_clip.h"

#include "kernels/ops.h"
#include "tensor/device_scalars.h"

namespace ft {

double grad_sum_squares(const ExecContext& ctx, const float* grads, int64_t n) {
  DeviceScalars s(ctx, 1);
  ops::sum_squares(ctx, s.at(0), grads, n);
  return s.read_back()[0];
}

float clip_coefficient(double global_norm, double max_norm) {
  if (max_norm <= 0) return 1.0f;
  double coef = max_norm / (global_norm + 1e-6);
  return coef < 1.0 ? static_cast<float>(coef) : 1.0f;
}

}  // namespace ft

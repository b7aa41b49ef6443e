// PowerSGD's own steps (op_decls.inc, "Gradient compression"): Gram–Schmidt on the small factor P
// and the error feedback. Gram–Schmidt's dot products are sequential double sums (the same bits
// on any thread count); its updates and the error feedback are elementwise.
#include <cmath>

#include "kernels/ops.h"

namespace ft::cpu {

namespace {
constexpr int64_t kParallelMin = 1 << 15;  // below this, threads cost more than they save

double column_dot(const float* P, int64_t n, int64_t r, int64_t j, int64_t k) {
  double dot = 0;
  for (int64_t i = 0; i < n; ++i) dot += static_cast<double>(P[i * r + j]) * P[i * r + k];
  return dot;
}
}  // namespace

// P (n, r): columns j = 0 .. r-1 in turn.
void gram_schmidt(const ExecContext&, float* P, int64_t n, int64_t r) {
  for (int64_t j = 0; j < r; ++j) {
    for (int64_t k = 0; k < j; ++k) {
      const float dot = static_cast<float>(column_dot(P, n, r, j, k));
#pragma omp parallel for schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) P[i * r + j] -= dot * P[i * r + k];
    }
    const float inv = static_cast<float>(1.0 / (std::sqrt(column_dot(P, n, r, j, j)) + 1e-8));
#pragma omp parallel for schedule(static) if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) P[i * r + j] *= inv;
  }
}

void powersgd_error_feedback(const ExecContext&, float* error, float* grad, const float* approx, float ranks,
                             int64_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    error[i] = grad[i] - approx[i] / ranks;
    grad[i] = approx[i];
  }
}

}  // namespace ft::cpu

// The vocab-parallel cross-entropy's per-row steps (op_decls.inc): a rank's targets and target
// logits, and the combination of the ranks' row statistics in double. Elementwise over rows,
// parallel over rows when there are many; each row's arithmetic is the reference's, so the
// results are bit-identical to it.
#include <cmath>

#include "kernels/ops.h"

namespace ft::cpu {

namespace {
constexpr int64_t kParallelRows = 1 << 14;  // below this, threads cost more than they save
}  // namespace

void xent_shard_targets(const ExecContext&, int32_t* local, const int32_t* targets, int64_t N, int64_t v0, int64_t V) {
#pragma omp parallel for schedule(static) if (N > kParallelRows)
  for (int64_t n = 0; n < N; ++n) {
    const int64_t t = targets[n];
    local[n] = t < 0 ? -1 : static_cast<int32_t>(t < v0 ? V : t - v0);
  }
}

void xent_target_logit(const ExecContext&, float* target_logit, const float* logits, const int32_t* targets, int64_t N,
                       int64_t V) {
#pragma omp parallel for schedule(static) if (N > kParallelRows)
  for (int64_t n = 0; n < N; ++n) {
    const int64_t t = targets[n];
    target_logit[n] = t >= 0 && t < V ? logits[n * V + t] : 0.0f;
  }
}

void xent_combine_max(const ExecContext&, double* row_max, const float* lse, int64_t N) {
#pragma omp parallel for schedule(static) if (N > kParallelRows)
  for (int64_t n = 0; n < N; ++n) row_max[n] = lse[n];
}

void xent_combine_sums(const ExecContext&, double* sums, const float* lse, const float* target_logit,
                       const double* row_max, int64_t N) {
#pragma omp parallel for schedule(static) if (N > kParallelRows)
  for (int64_t n = 0; n < N; ++n) {
    sums[n] = std::exp(static_cast<double>(lse[n]) - row_max[n]);
    sums[N + n] = target_logit[n];
  }
}

void xent_combine_finish(const ExecContext&, float* lse, float* target_logit, const double* row_max, const double* sums,
                         int64_t N) {
#pragma omp parallel for schedule(static) if (N > kParallelRows)
  for (int64_t n = 0; n < N; ++n) {
    lse[n] = static_cast<float>(row_max[n] + std::log(sums[n]));
    target_logit[n] = static_cast<float>(sums[N + n]);
  }
}

void xent_loss_from_rows(const ExecContext&, float* loss, const float* lse, const float* target_logit,
                         const int32_t* targets, int64_t N) {
#pragma omp parallel for schedule(static) if (N > kParallelRows)
  for (int64_t n = 0; n < N; ++n) loss[n] = targets[n] < 0 ? 0.0f : lse[n] - target_logit[n];
}

}  // namespace ft::cpu

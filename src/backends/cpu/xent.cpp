// Softmax cross-entropy over rows of a logits chunk (vocab-parallel aware: a target >= V belongs
// to another vocab shard). Parallel over rows. Forward sweeps a row twice (max, then Σ e^(z−max));
// a row of a 32k vocabulary (128 KB) stays in L2 in between, so memory is read once.
#include <cmath>

#include "backends/cpu/simd.h"
#include "kernels/ops.h"

namespace ft::cpu {

using namespace simd;

namespace {
constexpr int64_t kChunk = 1024;  // Σ e^(z−max) in fp32 per chunk of a row, chunks summed in double

// logsumexp of one row z(V).
double row_logsumexp(const float* z, int64_t V) {
  F32x16 mx = set1(-INFINITY);
  for (int64_t j = 0; j < V; j += kLanes) {
    int w = width(V - j);
    mx = max(mx, pad_neg_inf(load(z + j, w), w));
  }
  float m = reduce_max(mx);
  if (std::isinf(m)) return m;  // all -inf (→ -inf) or some +inf (→ +inf)
  F32x16 mv = set1(m);
  double sum = 0;
  for (int64_t j0 = 0; j0 < V; j0 += kChunk) {
    int64_t j1 = j0 + kChunk < V ? j0 + kChunk : V;
    F32x16 acc = zero();
    for (int64_t j = j0; j < j1; j += kLanes) {
      int w = width(j1 - j);
      acc = acc + exp(pad_neg_inf(load(z + j, w), w) - mv);  // padded lanes add e^-inf = 0
    }
    sum += reduce_add(acc);
  }
  return m + std::log(sum);
}
}  // namespace

// loss(N), lse(N) from logits(N, V), targets(N).
void xent_forward(const ExecContext&, float* loss, float* lse, const float* logits, const int32_t* targets, int64_t N,
                  int64_t V) {
#pragma omp parallel for schedule(static) if (N * V > 16384)
  for (int64_t n = 0; n < N; ++n) {
    const float* z = logits + n * V;
    double l = row_logsumexp(z, V);
    lse[n] = static_cast<float>(l);
    int32_t t = targets[n];
    loss[n] = (t >= 0 && t < V) ? static_cast<float>(l - static_cast<double>(z[t])) : 0.0f;
  }
}

namespace {
// dlogits(N, V) (fp32 or bf16) = scale · (e^(z − lse) − onehot(target)); rows with a target < 0
// are 0. An fp32 dlogits may alias logits: each element is read before it is written.
template <typename Out>
void backward(Out* dlogits, const float* logits, const float* lse, const int32_t* targets, int64_t N, int64_t V,
              float scale) {
#pragma omp parallel for schedule(static) if (N * V > 16384)
  for (int64_t n = 0; n < N; ++n) {
    const float* z = logits + n * V;
    Out* d = dlogits + n * V;
    int32_t t = targets[n];
    if (t < 0) {
      for (int64_t j = 0; j < V; j += kLanes) store(d + j, zero(), width(V - j));
      continue;
    }
    bool own = t < V;  // the one-hot term lives in this shard
    float p_t = own ? static_cast<float>(std::exp(static_cast<double>(z[t]) - lse[n])) : 0.0f;
    F32x16 l = set1(lse[n]), s = set1(scale);
    for (int64_t j = 0; j < V; j += kLanes) {
      int w = width(V - j);
      store(d + j, exp(load(z + j, w) - l) * s, w);
    }
    if (own) store(d + t, set1((p_t - 1.0f) * scale), 1);
  }
}
}  // namespace

void xent_backward(const ExecContext&, float* dlogits, const float* logits, const float* lse, const int32_t* targets,
                   int64_t N, int64_t V, float scale) {
  backward(dlogits, logits, lse, targets, N, V, scale);
}
void xent_backward_bf16(const ExecContext&, uint16_t* dlogits, const float* logits, const float* lse,
                        const int32_t* targets, int64_t N, int64_t V, float scale) {
  backward(dlogits, logits, lse, targets, N, V, scale);
}

}  // namespace ft::cpu

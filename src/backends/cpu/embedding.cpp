// Token embedding (vocab-parallel aware): rows of tokens outside [v0, v0 + V) are another shard's.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "backends/cpu/simd.h"
#include "kernels/ops.h"

namespace ft::cpu {

using namespace simd;

// out(N, C) = table(V, C)[tokens(N) - v0], or 0 for tokens of other shards. Parallel over tokens.
void embedding_forward(const ExecContext&, float* out, const int32_t* tokens, const float* table, int64_t N, int64_t C,
                       int64_t v0, int64_t V) {
#pragma omp parallel for schedule(static) if (N * C > 8192)
  for (int64_t n = 0; n < N; ++n) {
    int64_t row = static_cast<int64_t>(tokens[n]) - v0;
    float* o = out + n * C;
    if (row >= 0 && row < V) {
      std::memcpy(o, table + row * C, static_cast<size_t>(C) * sizeof(float));
    } else {
      std::memset(o, 0, static_cast<size_t>(C) * sizeof(float));
    }
  }
}

// dtable(V, C) += dout(N, C) rows, scattered by token. A token may repeat, so threads split the
// columns (whole 64-byte lines each) rather than the tokens: no races, and every element sums its
// contributions in token order whatever the thread count (bit-reproducible).
void embedding_backward(const ExecContext&, float* dtable, const float* dout, const int32_t* tokens, int64_t N,
                        int64_t C, int64_t v0, int64_t V) {
  int64_t blocks = (C + kLanes - 1) / kLanes;  // 16-float column blocks
#pragma omp parallel if (N * C > 8192)
  {
    int nt = omp_get_num_threads(), t = omp_get_thread_num();
    int64_t b0 = blocks * t / nt, b1 = blocks * (t + 1) / nt;
    int64_t c0 = b0 * kLanes, c1 = std::min(C, b1 * kLanes);
    for (int64_t n = 0; n < N; ++n) {
      int64_t row = static_cast<int64_t>(tokens[n]) - v0;
      if (row < 0 || row >= V) continue;
      float* d = dtable + row * C;
      const float* g = dout + n * C;
      for (int64_t c = c0; c < c1; c += kLanes) {
        int w = width(c1 - c);
        store(d + c, load(d + c, w) + load(g + c, w), w);
      }
    }
  }
}

}  // namespace ft::cpu

// Elementwise helpers over flat arrays: residual adds, gradient scaling, squared norms, conversions.
// Parallel over fixed-size blocks; small arrays stay on the calling thread.
#include <algorithm>
#include <vector>

#include "backends/cpu/simd.h"
#include "kernels/ops.h"
#include "tensor/f16_convert.h"

namespace ft::cpu {

using namespace simd;

namespace {
constexpr int64_t kParallelMin = 1 << 15;  // below this, threads cost more than they save
constexpr int64_t kBlock = 1 << 14;        // sum_squares: one partial per block

}  // namespace

// y(n) += x(n)
void add_inplace(const ExecContext&, float* y, const float* x, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; i += kLanes) {
    int w = width(n - i);
    store(y + i, load(y + i, w) + load(x + i, w), w);
  }
}

// *sum += Σ x(n)², in double. Blocks of kBlock are summed in block order, so the result does not
// depend on the thread count.
void sum_squares(const ExecContext&, double* sum, const float* x, int64_t n) {
  int64_t blocks = (n + kBlock - 1) / kBlock;
  if (blocks <= 1) {
    *sum += sum_squares_f64(x, n);
    return;
  }
  std::vector<double> part(static_cast<size_t>(blocks));
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t b = 0; b < blocks; ++b) {
    int64_t i0 = b * kBlock;
    part[b] = sum_squares_f64(x + i0, (n - i0) < kBlock ? n - i0 : kBlock);
  }
  double s = 0;
  for (double p : part) s += p;
  *sum += s;
}

// *sum += x(0), x(1), ... one at a time, in double: the order is the op's contract (a loss sum
// identical on every device), so it stays a serial loop — n is a chunk of token losses.
void sum_in_order(const ExecContext&, double* sum, const float* x, int64_t n) {
  double s = *sum;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]);
  *sum = s;
}

// y(n) = bf16(x(n))
void to_bf16(const ExecContext&, uint16_t* y, const float* x, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; i += kLanes) {
    int w = width(n - i);
    store(y + i, load(x + i, w), w);
  }
}

// y(n) = fp32(x(n))
void from_bf16(const ExecContext&, float* y, const uint16_t* x, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; i += kLanes) {
    int w = width(n - i);
    store(y + i, load_bf16(x + i, w), w);
  }
}

// y(n) = fp16(x(n)), blocks of kBlock on the threads; within a block AVX-512, F16C or scalar, as
// the CPU has (tensor/f16_convert.h: the same bits on every path).
void to_fp16(const ExecContext&, uint16_t* y, const float* x, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; i += kBlock) f32_to_f16_array(y + i, x + i, static_cast<size_t>(std::min(kBlock, n - i)));
}

// y(n) = fp32(x(n))
void from_fp16(const ExecContext&, float* y, const uint16_t* x, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; i += kBlock) f16_to_f32_array(y + i, x + i, static_cast<size_t>(std::min(kBlock, n - i)));
}

}  // namespace ft::cpu

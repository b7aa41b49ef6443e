// Device helpers shared by the fp32 attention kernels (attention.cu, attention_block.cu): the
// fixed-order dot product of two rows and the tile load. Both kernels files use the same ones, so
// a score recomputed in a backward has the forward's bits.
#pragma once

#include <cstdint>

#include "backends/cuda/op_math.h"

namespace ft::cuda {

// An element as fp32: the fp32 kernels read fp32 or bf16 (uint16_t bit patterns) through this, so
// one kernel serves both (bf16 widened on load, exactly).
__device__ __forceinline__ float load_f32(float x) {
  return x;
}
__device__ __forceinline__ float load_f32(uint16_t x) {
  return math::from_bf16(x);
}

// Dot product of two rows in shared memory, in a fixed order (the same in every kernel, so the
// backward recomputes the forward's scores exactly): four interleaved partial sums, then the
// remainder. One running sum loses ~√D more than this (the virtual GPU found attention_forward's
// peaked-softmax harness row 12% over its tolerance with it: scores in the thousands, an error of
// 1e-3 in a score is 1e-4 in its probability); four chains also overlap their FMA latencies.
__device__ __forceinline__ float dot_row(const float* a, const float* b, int64_t D) {
  float acc0 = 0.0f, acc1 = 0.0f, acc2 = 0.0f, acc3 = 0.0f;
  int64_t d = 0;
  for (; d + 4 <= D; d += 4) {
    acc0 += a[d] * b[d];
    acc1 += a[d + 1] * b[d + 1];
    acc2 += a[d + 2] * b[d + 2];
    acc3 += a[d + 3] * b[d + 3];
  }
  for (; d < D; ++d) acc0 += a[d] * b[d];
  return (acc0 + acc1) + (acc2 + acc3);
}

// Copies rows [r0, r0 + rows) of a strided source into a (R, ld) tile, zero-filling rows past
// `rows` (the whole block takes part). In: float, or uint16_t (bf16, widened).
template <typename In>
__device__ __forceinline__ void load_tile(float* tile, int64_t ld, const In* src, int64_t stride, int64_t rows,
                                          int64_t R, int64_t D) {
  for (int64_t e = threadIdx.x; e < R * D; e += blockDim.x) {
    const int64_t r = e / D, c = e % D;
    tile[r * ld + c] = r < rows ? load_f32(src[r * stride + c]) : 0.0f;
  }
}

}  // namespace ft::cuda

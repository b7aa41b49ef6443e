// Stores an fp32 value as the output type of an op: fp32 as is, uint16_t as bf16 (round to
// nearest even) — the bf16-output overloads of op_decls.inc are the fp32 op, then rounding.
#pragma once

#include <cstdint>

#include "backends/cuda/op_math.h"

namespace ft::cuda {

__device__ __forceinline__ void store(float* p, float v) {
  *p = v;
}
__device__ __forceinline__ void store(uint16_t* p, float v) {
  *p = math::to_bf16(v);
}

}  // namespace ft::cuda

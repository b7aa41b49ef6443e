// Stores an fp32 value as the output type of an op: fp32 as is, uint16_t as bf16 (round to
// nearest even) — the bf16-output overloads of op_decls.inc are the fp32 op, then rounding.
// And V consecutive elements moved in 16-byte accesses (float4; 8 bf16 in a uint4; 4 bf16 in an
// 8-byte uint2), or one element at a time when V is 1 — the kernels pick V on the host
// (vector_width, aligned16) from the sizes and the pointers' alignment.
//
//   float v[8];
//   load_vec<8>(in + i, v);          // 8 bf16 widened to fp32, one 16-byte load
//   store_vec<8>(out + i, v);        // rounded to bf16, one 16-byte store
#pragma once

#include <cstdint>

#include "backends/cuda/op_math.h"
#include "backends/cuda/simt.h"

namespace ft::cuda {

__device__ __forceinline__ void store(float* p, float v) {
  *p = v;
}
__device__ __forceinline__ void store(uint16_t* p, float v) {
  *p = math::to_bf16(v);
}

template <int V>
__device__ __forceinline__ void load_vec(const float* p, float (&v)[V]) {
  static_assert(V == 1 || V % 4 == 0, "fp32 vectors are 1 or a multiple of 4 wide");
  if constexpr (V == 1) {
    v[0] = *p;
  } else {
    FT_VECTOR_ACCESS(p, 16);
    for (int k = 0; k < V / 4; ++k) {
      const float4 q = reinterpret_cast<const float4*>(p)[k];
      v[4 * k] = q.x, v[4 * k + 1] = q.y, v[4 * k + 2] = q.z, v[4 * k + 3] = q.w;
    }
  }
}

template <int V>
__device__ __forceinline__ void store_vec(float* p, const float (&v)[V]) {
  static_assert(V == 1 || V % 4 == 0, "fp32 vectors are 1 or a multiple of 4 wide");
  if constexpr (V == 1) {
    *p = v[0];
  } else {
    FT_VECTOR_ACCESS(p, 16);
    for (int k = 0; k < V / 4; ++k)
      reinterpret_cast<float4*>(p)[k] = make_float4(v[4 * k], v[4 * k + 1], v[4 * k + 2], v[4 * k + 3]);
  }
}

// Two bf16 in a 32-bit word, the first in the low half (little-endian memory order).
__device__ __forceinline__ void unpack_bf16x2(uint32_t w, float* lo, float* hi) {
  *lo = math::from_bf16(static_cast<uint16_t>(w & 0xffffu));
  *hi = math::from_bf16(static_cast<uint16_t>(w >> 16));
}
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  return static_cast<uint32_t>(math::to_bf16(lo)) | (static_cast<uint32_t>(math::to_bf16(hi)) << 16);
}

// bf16: 1, 4 (one 8-byte uint2) or a multiple of 8 (16-byte uint4s) wide.
template <int V>
__device__ __forceinline__ void load_vec(const uint16_t* p, float (&v)[V]) {
  static_assert(V == 1 || V == 4 || V % 8 == 0, "bf16 vectors are 1, 4 or a multiple of 8 wide");
  if constexpr (V == 1) {
    v[0] = math::from_bf16(*p);
  } else if constexpr (V == 4) {
    FT_VECTOR_ACCESS(p, 8);
    const uint2 q = *reinterpret_cast<const uint2*>(p);
    unpack_bf16x2(q.x, &v[0], &v[1]);
    unpack_bf16x2(q.y, &v[2], &v[3]);
  } else {
    FT_VECTOR_ACCESS(p, 16);
    for (int k = 0; k < V / 8; ++k) {
      const uint4 q = reinterpret_cast<const uint4*>(p)[k];
      float* o = v + 8 * k;
      unpack_bf16x2(q.x, &o[0], &o[1]);
      unpack_bf16x2(q.y, &o[2], &o[3]);
      unpack_bf16x2(q.z, &o[4], &o[5]);
      unpack_bf16x2(q.w, &o[6], &o[7]);
    }
  }
}

template <int V>
__device__ __forceinline__ void store_vec(uint16_t* p, const float (&v)[V]) {
  static_assert(V == 1 || V == 4 || V % 8 == 0, "bf16 vectors are 1, 4 or a multiple of 8 wide");
  if constexpr (V == 1) {
    *p = math::to_bf16(v[0]);
  } else if constexpr (V == 4) {
    FT_VECTOR_ACCESS(p, 8);
    *reinterpret_cast<uint2*>(p) = make_uint2(pack_bf16x2(v[0], v[1]), pack_bf16x2(v[2], v[3]));
  } else {
    FT_VECTOR_ACCESS(p, 16);
    for (int k = 0; k < V / 8; ++k) {
      const float* o = v + 8 * k;
      reinterpret_cast<uint4*>(p)[k] = make_uint4(pack_bf16x2(o[0], o[1]), pack_bf16x2(o[2], o[3]),
                                                  pack_bf16x2(o[4], o[5]), pack_bf16x2(o[6], o[7]));
    }
  }
}

}  // namespace ft::cuda

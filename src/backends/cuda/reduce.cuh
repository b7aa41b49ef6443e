// Device-side reductions in a fixed order (no atomics): the same inputs give the same bits on
// every run. Block reductions assume blockDim.x == kRowThreads (launch.h).
//
//   FT_SHARED(double, partial, kRowThreads / kWarp);   // simt.h
//   double s = block_sum(my_part, partial);     // every thread gets the block's sum
#pragma once

#include <cuda_runtime.h>

#include "backends/cuda/launch.h"

namespace ft::cuda {

inline constexpr unsigned kFullMask = 0xffffffffu;

// Butterfly over the warp, then lane 0's value to every lane (lanes' butterflies associate
// differently; one value for all keeps every lane's later math identical).
template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return __shfl_sync(kFullMask, v, 0);
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

// partial: kRowThreads / kWarp elements of shared memory. Ends with a barrier, so the same
// buffer can be reused by the next reduction.
template <typename T>
__device__ __forceinline__ T block_sum(T v, T* partial) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = warp_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  T total = 0;
  if (warp == 0) {
    total = lane < kRowThreads / kWarp ? partial[lane] : T(0);
    total = warp_sum(total);
    if (lane == 0) partial[0] = total;
  }
  __syncthreads();
  total = partial[0];
  __syncthreads();
  return total;
}

__device__ __forceinline__ float block_max(float v, float* partial) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = warp_max(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float m = lane < kRowThreads / kWarp ? partial[lane] : -INFINITY;
    m = warp_max(m);
    if (lane == 0) partial[0] = m;
  }
  __syncthreads();
  const float m = partial[0];
  __syncthreads();
  return m;
}

// Kernel launch arguments from launch.h's int64 shapes (checked by within_limits in the tests).
inline dim3 to_dim3(const Extent& e) {
  return dim3(static_cast<unsigned>(e.x), static_cast<unsigned>(e.y), static_cast<unsigned>(e.z));
}

}  // namespace ft::cuda

// Shim: cub::DeviceRadixSort::SortPairs on the virtual GPU — a stable sort of (key, value) pairs
// by the key's bits [begin_bit, end_bit), the result an LSD radix sort gives (executor.cpp).
//
//   cub::DeviceRadixSort::SortPairs(tmp, bytes, keys, keys_out, vals, vals_out, n, 0, bits, stream);
#pragma once
#include <cstddef>
#include <cstdint>

#include "vgpu/cuda_sim.h"

namespace cub {
struct DeviceRadixSort {
  static cudaError_t SortPairs(void* temp, size_t& temp_bytes, const uint32_t* keys_in, uint32_t* keys_out,
                               const uint32_t* values_in, uint32_t* values_out, int n, int begin_bit, int end_bit,
                               cudaStream_t stream);
};
}  // namespace cub

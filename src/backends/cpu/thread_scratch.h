// Per-thread scratch for OpenMP kernels: one tracked allocation (MemCategory::kWorkspace) made
// before the parallel region — an exception must not escape one — and sliced per thread.
//
//   ThreadScratch buf(per_thread_floats);             // omp_get_max_threads() slices
//   #pragma omp parallel
//   { float* mine = buf.slice(omp_get_thread_num()); ... }
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "tensor/memory.h"

namespace ft::cpu {

class ThreadScratch {
 public:
  // Slices are rounded up to 16 floats so each starts on its own 64-byte line.
  explicit ThreadScratch(int64_t per_thread, int threads = omp_get_max_threads())
      : stride_((std::max<int64_t>(per_thread, 1) + 15) / 16 * 16),
        bytes_(static_cast<size_t>(stride_ * std::max(threads, 1)) * sizeof(float)),
        p_(static_cast<float*>(mem_alloc(Device::kCPU, bytes_, MemCategory::kWorkspace))) {}
  ~ThreadScratch() { mem_free(Device::kCPU, p_, bytes_, MemCategory::kWorkspace); }
  ThreadScratch(const ThreadScratch&) = delete;
  ThreadScratch& operator=(const ThreadScratch&) = delete;

  float* slice(int tid) const { return p_ + stride_ * tid; }

 private:
  int64_t stride_;
  size_t bytes_;
  float* p_;
};

}  // namespace ft::cpu

// BufferPool: reusable float buffers for short-lived per-unit copies (ZeRO-2 gradient buffers,
// ZeRO-3 gathered weights), so a step does not allocate and free (and page-fault) them anew.
// Buffers are tracked under the pool's memory category while they exist.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace ft {

class BufferPool {
 public:
  explicit BufferPool(MemCategory cat, Device dev = Device::kCPU) : cat_(cat), dev_(dev) {}
  // A buffer of at least n floats (contents undefined: NaN in the poison build).
  Tensor acquire(int64_t n);
  void release(Tensor t);

 private:
  MemCategory cat_;
  Device dev_;
  std::vector<Tensor> free_;
};

}  // namespace ft

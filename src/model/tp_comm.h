// TpComm: the communication points of tensor parallelism, written once as conjugate pairs
// (Megatron's f and g). The single-device model calls them; for one rank they are the identity.
// dist/tensor_parallel implements them over the tensor-parallel group.
//
//   copy:   forward identity,   backward all-reduce   (before a column-parallel matmul)
//   reduce: forward all-reduce, backward identity     (after a row-parallel matmul)
#pragma once

#include <cstdint>

namespace ft {

class TpComm {
 public:
  virtual ~TpComm() = default;
  virtual int64_t size() const { return 1; }
  // copy's backward: sum the input gradient over the group.
  virtual void copy_backward(float* dx, int64_t n) {}
  // reduce's forward: sum the partial outputs over the group.
  virtual void reduce_forward(float* y, int64_t n) {}
};

}  // namespace ft

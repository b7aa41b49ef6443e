// DeviceScalars: a few doubles in a context's device memory that ops add into (the loss sums of
// micro-batches, the gradient's sums of squares), and the one explicit place they come back to
// the host: read_back(), one copy for all of them. On the CPU device memory is host memory and
// the copy is a plain copy; on a GPU it is the device-to-host copy the step waits for.
//
//   DeviceScalars sums(ctx, micro_batches);            // zeroed
//   model.forward_backward(params, acts, seqs, scale, sums.at(mb));
//   std::vector<double> v = sums.read_back();          // once per step
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/exec_context.h"
#include "tensor/tensor.h"

namespace ft {

class DeviceScalars {
 public:
  DeviceScalars() = default;
  // n doubles on ctx.device (MemCategory::kWorkspace), zero.
  DeviceScalars(const ExecContext& ctx, int64_t n);

  int64_t size() const { return values_.numel(); }
  // Scalars [offset, offset + n) of these as their own DeviceScalars, sharing the memory: parts
  // of one step's scalars that different owners fill, read back together by the whole.
  DeviceScalars slice(int64_t offset, int64_t n) const;
  // The device address of scalar i, for an op to add into.
  double* at(int64_t i);
  // Every scalar back to 0.
  void zero();
  // The scalars on the host, in order: one copy.
  std::vector<double> read_back() const;
  // The same copy, the scalars added in order from 0 (a step's loss, a norm's per-unit sums).
  double read_back_sum() const;

 private:
  ExecContext ctx_;
  Tensor values_;  // f64 (n) on ctx_.device
};

}  // namespace ft

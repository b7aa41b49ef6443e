// TpComm: the communication points of tensor parallelism, written once as conjugate pairs
// (Megatron's f and g). The single-device model calls them; for one rank they are the identity.
// parallel/tensor_parallel implements them over the tensor-parallel group.
//
//   copy:    forward identity,       backward all-reduce       (before a column-parallel matmul)
//   reduce:  forward all-reduce,     backward identity         (after a row-parallel matmul)
// with sequence parallelism (activations outside the matmuls hold N/tp tokens per rank):
//   gather:  forward all-gather,     backward reduce-scatter   (before a column-parallel matmul)
//   scatter: forward reduce-scatter, backward all-gather       (after a row-parallel matmul)
// The model calls the half of each pair that communicates; sizes are in floats, `n` counts
// one rank's shard of (N/tp, C) rows where shards are involved.
//
//   tp.reduce_forward(partial, N * C);                 // row-parallel output summed over the group
//   tp.gather_forward(full, shard, N / tp * C);        // (N/tp, C) shards -> (N, C) on every rank
#pragma once

#include <cstdint>

#include "tensor/memory.h"

namespace ft {

class TpComm {
 public:
  // ctx: where the identity's copies run (one rank's gather and scatter).
  explicit TpComm(const ExecContext& ctx = {}) : ctx_(ctx) {}
  virtual ~TpComm() = default;
  virtual int64_t size() const { return 1; }
  virtual int64_t rank() const { return 0; }
  // Norms and residuals on sequence shards (parallel.sequence_parallel).
  virtual bool sequence_parallel() const { return false; }

  // copy's backward: sum the input gradient over the group.
  virtual void copy_backward(float* dx, int64_t n) {}
  // reduce's forward: sum the partial outputs over the group.
  virtual void reduce_forward(float* y, int64_t n) {}
  // gather's forward: full (size · n) = the shards of every rank in rank order.
  virtual void gather_forward(float* full, const float* shard, int64_t n) { copy(full, shard, n); }
  // gather's backward: dshard (n) = this rank's block of the sum of every rank's dfull (size · n).
  virtual void gather_backward(float* dshard, const float* dfull, int64_t n) { copy(dshard, dfull, n); }
  // scatter's forward: shard (n) = this rank's block of the sum of every rank's partial (size · n).
  void scatter_forward(float* shard, const float* partial, int64_t n) { gather_backward(shard, partial, n); }
  // scatter's backward: dfull (size · n) = the shard gradients of every rank.
  void scatter_backward(float* dfull, const float* dshard, int64_t n) { gather_forward(dfull, dshard, n); }

  // Vocab-parallel cross-entropy over n rows: on entry lse holds the log-sum-exp of this rank's
  // logits and target_logit the target's logit where this rank holds the target (0 elsewhere);
  // on return both are over the whole vocabulary, identical on every rank.
  virtual void combine_xent_rows(float* lse, float* target_logit, int64_t n) {}

 private:
  void copy(float* to, const float* from, int64_t n) const {
    mem_copy(ctx_, to, ctx_.device, from, ctx_.device, static_cast<size_t>(n) * sizeof(float));
  }
  ExecContext ctx_;
};

}  // namespace ft

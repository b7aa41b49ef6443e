// PinnedBatch: where a rank's token batch waits in host memory for its copy to the device — memory
// from mem_alloc_host (pinned on a GPU, so the copies are asynchronous DMA on the rank's stream),
// allocated once and reused every step. On the CPU the loader's batch is used where it is.
//
//   PinnedBatch pinned(ctx);
//   const int32_t* seqs = pinned.stage(batch);   // (batch, seq_len + 1) host tokens
//   model.forward_backward(params, acts, seqs + mb * size * (T + 1), ...);   // load_batch copies them up
#pragma once

#include <cstddef>
#include <cstdint>

#include "data/loader/loader.h"
#include "tensor/exec_context.h"

namespace ft {

class PinnedBatch {
 public:
  explicit PinnedBatch(const ExecContext& ctx) : ctx_(ctx) {}
  ~PinnedBatch();
  PinnedBatch(const PinnedBatch&) = delete;
  PinnedBatch& operator=(const PinnedBatch&) = delete;

  // The batch's tokens in memory the device copies from. Valid until the next stage(); the
  // previous batch's copies must have been consumed (they are: a step reads its batch before the
  // next one is staged, in stream order).
  const int32_t* stage(const Batch& b);

 private:
  ExecContext ctx_;
  int32_t* host_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace ft

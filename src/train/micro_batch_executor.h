// MicroBatchExecutor: the plain step — this rank's batch cut into micro-batches (split_batch),
// each run forward and backward through the whole model (Llama::forward_backward) over one
// Activations set, the gradients accumulating in the engine. Data and tensor parallelism need
// nothing more: the engine's hooks and the model's TpComm do their communication.
//
//   MicroBatchExecutor exec(ctx, model, engine, batching, seq_len, chunk_tokens);
//   exec.train_queued(batch, 1.0f / (batch_size * seq_len));  // the loss: exec.loss_slots(), added in order
#pragma once

#include <cstdint>

#include "model/activations.h"
#include "model/llama.h"
#include "parallel/data_parallel/param_engine.h"
#include "parallel/micro_batches.h"
#include "tensor/device_scalars.h"
#include "train/pinned_batch.h"
#include "train/step_executor.h"

namespace ft {

class MicroBatchExecutor final : public StepExecutor {
 public:
  // Allocates the Activations of one micro-batch (mb.size sequences of seq_len, or this rank's
  // share of each under context parallelism: Llama::local_seq_len), the loss chunked
  // by loss_chunk_tokens (model/activation_sizes.h loss_chunk_tokens).
  MicroBatchExecutor(const ExecContext& ctx, Llama& model, ParamEngine& engine, const MicroBatching& mb,
                     int64_t seq_len, int64_t loss_chunk_tokens);

  void train_queued(const Batch& batch, float grad_scale) override;
  const DeviceScalars& loss_slots() const override { return loss_sums_; }
  void use_loss_slots(DeviceScalars slots) override;
  void evaluate(const Batch& batch, BatchLoss& total) override;
  // Capturable: the pinned buffer and every device buffer are the same from step to step.
  bool capturable() const override { return true; }
  void stage(const Batch& batch) override;
  void queue_staged(float grad_scale) override;

 private:
  void check(const Batch& batch) const;  // the batch is this rank's share, of seq_len tokens

  Llama& model_;
  ParamEngine& engine_;
  MicroBatching mb_;
  int64_t seq_len_;
  Activations acts_;
  DeviceScalars loss_sums_;          // one device slot per micro-batch, read back once per batch
  PinnedBatch pinned_;               // the batch's tokens on their way to the device
  const int32_t* staged_ = nullptr;  // the staged batch: in pinned_, or the loader's (the CPU)
};

}  // namespace ft

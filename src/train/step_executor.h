// StepExecutor: how this rank runs its share of a batch through the model — the plain loop over
// its micro-batches, or its pipeline stage's schedule (PipelineRunner). One interface, so the
// trainer's step reads the same for every layout:
//
//   std::unique_ptr<StepExecutor> exec = std::make_unique<MicroBatchExecutor>(model, engine, mb, seq_len, chunk);
//   exec->train_queued(batch, grad_scale);         // forward + backward of every micro-batch
//   double loss_sum = exec->loss_slots().read_back_sum();  // the trainer reads it with the norm
//   BatchLoss v;  exec->evaluate(val_batch, v);    // forwards only: no gradient is touched
//   gather_per_rank(world, exec->stats());         // what it measured of the last train_queued()
//
// train_queued() opens the engine's step (begin_step) and each micro-batch (begin_micro_batch), so
// the ZeRO engines' per-unit hooks see the same sequence under every executor; the trainer then
// finishes the gradients (ParamEngine::queue_gradient_norm, reduce_gradient_norm) and updates.
// Both calls are collective over the groups the model and the engine use (tensor parallelism,
// ZeRO-3's weight gathers over dp, the pipeline's stages).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "data/loader/loader.h"
#include "tensor/device_scalars.h"

namespace ft {

// The loss of what this rank computed: under a pipeline only the last stage computes losses,
// the other stages report zeros. The global mean is Σ sum over the ranks / the batch's tokens.
struct BatchLoss {
  double sum = 0;      // the sum of the token losses
  int64_t tokens = 0;  // the token positions it covers (sequences × seq_len)
};

// Figures by name, one value each: what gather_per_rank collects from every rank.
using RankFigures = std::vector<std::pair<std::string, double>>;

class StepExecutor {
 public:
  virtual ~StepExecutor() = default;

  // This rank's batch (its slice of the global batch, (local_batch, seq_len + 1) tokens): forward,
  // loss and backward of every micro-batch. Parameter gradients accumulate (+=) grad_scale ·
  // d(sum of token losses); the trainer finishes them (ParamEngine::queue_gradient_norm). Nothing
  // is read back: the batch's loss sums stay in the device slots (loss_slots(), added in order
  // they are the loss) for the trainer to read back with the step's other scalars;
  // use_loss_slots() hands the executor other slots of that size (a slice of those).
  virtual void train_queued(const Batch& batch, float grad_scale) = 0;
  virtual const DeviceScalars& loss_slots() const = 0;
  virtual void use_loss_slots(DeviceScalars slots) = 0;
  // Forwards only (validation): adds the batch's losses to `total`, micro-batch by micro-batch
  // (a validation sums its batches in one running sum). Neither gradients nor weights change.
  virtual void evaluate(const Batch& batch, BatchLoss& total) = 0;

  // train_queued() in two halves, for an executor whose device work can be captured as a graph
  // and replayed (train/step_graph.h; capturable() says whether it can): stage() does the host
  // part — the batch checked and put where the step's copies read it (one fixed pinned buffer) —
  // and queue_staged() queues only device work, with nothing the host reads or decides from device
  // values. stage() then queue_staged() is train_queued().
  virtual bool capturable() const { return false; }
  virtual void stage(const Batch& batch) { (void)batch; }
  virtual void queue_staged(float grad_scale) { (void)grad_scale; }

  // Its stats of the last train_queued(), this rank's (metrics.jsonl gathers them into "per_rank"); the
  // pipeline's timings, busy time, activation sets and bytes sent; nothing for the plain loop.
  virtual RankFigures stats() const { return {}; }
  // From every rank's stats (per_rank: name -> one value per world rank), what they say of the
  // whole step, into the metrics row: the pipeline's measured bubble against its theory. It may
  // drop figures that mean something only together (absolute clock readings).
  virtual void summarize(nlohmann::json& per_rank, nlohmann::json& row) const {
    (void)per_rank;
    (void)row;
  }
  // At the start of a run: what it will execute, in the log (the pipeline's schedule and partition).
  virtual void log_plan() const {}
};

}  // namespace ft

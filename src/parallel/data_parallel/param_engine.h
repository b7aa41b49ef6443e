// ParamEngine: how parameters, gradients and optimizer state are held and kept in sync across
// the data-parallel group — one implementation per ZeRO stage. It is the ParamAccess the model
// runs on, so data parallelism is applied from outside the model:
//
//   stage 0  every rank holds all weights, gradients and AdamW state; gradient buckets are
//            all-reduced during backward as soon as they are final (DDP);
//   stage 1  AdamW moments (and the update) are sharded; gradients are reduce-scattered per
//            unit, each rank updates its shard, and updated weights are all-gathered;
//   stage 2  also gradients: a unit's full gradient lives only during its backward, then is
//            reduce-scattered into the rank's shard (every micro-batch);
//   stage 3  also weights: a unit's weights are all-gathered before its forward and again
//            before its backward, the next unit's gather is prefetched, copies are freed.
// Shards are per unit (ParamLayout pads each unit to a multiple of the dp size): rank r holds
// piece r of every unit, an (offset, count) range of the flat arena.
//
// The trainer drives one step as:
//   engine.begin_step(n_micro);  for mb: engine.begin_micro_batch(mb); model.forward_backward(engine, ...);
//   engine.queue_gradient_norm();                  // waits for the reductions, sums into norm slots
//   double local = <the norm slots read back, with the step's loss, in one copy>;
//   double norm2 = engine.reduce_gradient_norm(local);  // global: over the dp, tp and pp groups
//   engine.optimizer_step(lr, clip_scale);         // or begin_update, queue_update (captured), end_update
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "model/param_access.h"
#include "model/param_layout.h"
#include "optim/optim_config.h"
#include "parallel/comm/comm.h"
#include "parallel/parallel_config.h"
#include "tensor/device_scalars.h"
#include "tensor/exec_context.h"

namespace ft {

struct EngineMemory {
  int64_t parameter_bytes = 0, gradient_bytes = 0, optimizer_bytes = 0;
};

class ParamEngine : public ParamAccess {
 public:
  virtual void begin_step(int micro_batches) = 0;
  virtual void begin_micro_batch(int index) = 0;
  // The gradient norm, in two halves around the step's one read-back (the trainer reads the norm
  // back with the step's loss in one copy). queue_gradient_norm waits for every gradient reduction
  // and sums this rank's squares into the norm slots (replicated pieces counted once), nothing
  // read back; reduce_gradient_norm takes those slots' sum (read back, added in order) and returns
  // the global sum of squared gradients: over the dp group (where the gradient is sharded), then
  // the tp group, then the pipeline's stages — the one place the norm is reduced. `over_stages`:
  // the caller's figures that are summed over the pipeline's stages too (the step's loss, which
  // the last stage alone has) ride in that same all-reduce, in place: one collective per group
  // for the step's host scalars. The norm rides second, after over_stages[0]: the element order
  // decides who adds first on a ring of more than two stages, and this is the order of every
  // published parity figure.
  virtual void queue_gradient_norm() = 0;
  static constexpr size_t kMaxStageSums = 7;  // over_stages' length at most
  virtual double reduce_gradient_norm(double local_sum, std::span<double> over_stages = {}) = 0;
  // The device slots queue_gradient_norm() sums into (one per unit); use_norm_slots() hands the
  // engine others of that size (a slice of the trainer's step scalars).
  virtual int64_t norm_slot_count() const = 0;
  virtual void use_norm_slots(DeviceScalars slots) = 0;
  // The AdamW update with this step's learning rate and gradient factor (clip coefficient over
  // the loss scale), in three parts so that a captured step (train/step_graph.h) can hold the
  // device work: begin_update (host: the checkpointer's wait, the step count, the step's scalars
  // into pinned memory), queue_update (device work: the same calls every step, the step's values
  // read from the device buffer AdamW copies them into), end_update (host bookkeeping, and the
  // collectives of ZeRO 1/2's weight gather).
  void optimizer_step(double lr, float grad_scale) {
    begin_update(lr, grad_scale);
    queue_update();
    end_update();
  }
  virtual void begin_update(double lr, float grad_scale) = 0;
  virtual void queue_update() = 0;
  virtual void end_update() {}
  // Whether queue_update() queues device work alone (no collectives): it may be captured.
  virtual bool update_capturable() const { return false; }
  virtual int64_t optimizer_steps() const = 0;

  // Copies the full fp32 weights into `out` (layout().total() floats) — checkpoints, tests.
  virtual void gather_weights(float* out) = 0;
  // Seconds the compute stream stalled on gradient communication in the last step (up to
  // queue_gradient_norm).
  virtual double last_wait_s() const = 0;

  // bf16 training: keep a bf16 copy of the weights for the GEMMs (weights_bf16), rounded once per
  // update. ZeRO 0-2 keep one; ZeRO 3 holds no full weights to copy (the model rounds each
  // gathered unit itself).
  virtual void keep_bf16_weights() {}
  // The fp32 weights were written outside optimizer_step (a checkpoint load, say): the bf16 copy
  // is made again before its next use.
  virtual void weights_changed() {}

  // Checkpoint state (ckpt/): this rank's piece of every unit — arena [begin, end) ranges in unit
  // order, the same under every ZeRO stage, so the dp ranks split the saving — and its fp32
  // master weights and AdamW moments over those ranges, back to back (state_size() floats each).
  virtual std::vector<std::pair<int64_t, int64_t>> state_ranges() const = 0;
  // The context the engine's ops run on (the rank's).
  virtual const ExecContext& context() const = 0;
  // The copies are queued on `on` (the checkpointer's side context, ordered after the step that
  // produced the state by stream_wait); the caller synchronizes `on` before it reads them.
  virtual void export_state(const ExecContext& on, float* weights, float* exp_avg, float* exp_avg_sq) = 0;
  // The inverse: collective over the dp group (copies other ranks hold are re-gathered).
  virtual void import_state(const float* weights, const float* exp_avg, const float* exp_avg_sq,
                            int64_t optimizer_steps) = 0;

  // Called at the start of every optimizer_step, before any state changes (null: nothing). The
  // checkpointer copies the state (export_state) on its background thread while the next
  // forward/backward runs — which only reads it — and waits here for that copy to finish.
  void set_before_update(std::function<void()> fn) { before_update_ = std::move(fn); }

 protected:
  void before_update() {
    if (before_update_) before_update_();
  }

 private:
  std::function<void()> before_update_;
};

// Builds the engine for parallel.zero over `layout` — this rank's part of the model: its pipeline
// stage's units and its tensor-parallel shard of them, with every unit padded to the dp size:
// ParamLayout::llama(model, dp.size(), units, {tp.rank(), tp.size(), sequence_parallel}). tp is
// the mesh's tp axis (partial gradients of replicated pieces, the gradient norm), pp its pipeline
// axis (the gradient norm over the stages, which hold disjoint parameters). Initialises
// weights from `seed` (dp rank 0 broadcasts). Its ops (the optimizer, gradient sums) run on ctx.
std::unique_ptr<ParamEngine> make_param_engine(const ExecContext& ctx, const ParallelConfig& p, const OptimConfig& o,
                                               ParamLayout layout, Communicator& dp, Communicator& tp, Communicator& pp,
                                               uint64_t seed);

}  // namespace ft

// What every ZeRO stage's engine shares: the padded layout (this rank's pipeline-stage units,
// its tensor-parallel shard of them), this rank's shard plan, the gradient reducer, the tensor-parallel gradient sync,
// the optimizer over the rank's pieces, the gradients (zeroed by begin_step) and the bookkeeping of pending
// communication; and what the stages that hold full weights (0-2) share: FullWeightsEngine. See param_engine.h
// for the stages.
#pragma once

#include <memory>
#include <vector>

#include "optim/adamw_optimizer.h"
#include "parallel/data_parallel/bf16_weights.h"
#include "parallel/data_parallel/grad_reducer.h"
#include "parallel/data_parallel/param_engine.h"
#include "parallel/data_parallel/shard_plan.h"
#include "parallel/tensor_parallel/tensor_parallel.h"
#include "tensor/device_scalars.h"
#include "tensor/stream_timer.h"

namespace ft {

class DpEngineBase : public ParamEngine {
 public:
  const ParamLayout& layout() const override { return layout_; }
  void begin_step(int micro_batches) override;
  void begin_micro_batch(int index) override { micro_ = index; }
  double reduce_gradient_norm(double local_sum, std::span<double> over_stages) final;
  int64_t norm_slot_count() const override { return norm2_.size(); }
  void use_norm_slots(DeviceScalars slots) override;
  // Every stage: the checkpointer's wait, then AdamW's host half (the step's scalars).
  void begin_update(double lr, float grad_scale) final {
    before_update();
    opt_->begin_step(lr, grad_scale);
  }
  int64_t optimizer_steps() const override { return opt_->steps_taken(); }
  double last_wait_s() const override { return stall_.seconds(); }
  std::vector<std::pair<int64_t, int64_t>> state_ranges() const override { return plan_.ranges(); }
  const ExecContext& context() const override { return ctx_; }
  void export_state(const ExecContext& on, float* weights, float* exp_avg, float* exp_avg_sq) override;
  void import_state(const float* weights, const float* exp_avg, const float* exp_avg_sq,
                    int64_t optimizer_steps) override;
  void weights_changed() override { ++generation_; }

 protected:
  DpEngineBase(const ExecContext& ctx, const ParallelConfig& p, const OptimConfig& o, ParamLayout layout,
               Communicator& dp, Communicator& tp, Communicator& pp, bool shard_optimizer);
  bool last_micro_batch() const { return micro_ == micro_batches_ - 1; }
  // The compute stream waits for every pending reduction (the host does not, on a GPU); the stall
  // is timed on the stream (stall_).
  void wait_pending();
  // The compute stream waits for w, the stall timed (comm_wait_s).
  void stream_wait_timed(Work& w);
  // Sum of squares of this rank's gradient pieces into norm2_, one slot per unit (pieces several
  // tp ranks hold counted once); reduce_gradient_norm sums them over the dp, tp and pp groups.
  void sharded_sum_squares(const float* grads, Addressing a);
  // Whether this rank's sum of squares covers only its dp piece of the gradient (ZeRO 1-3: summed
  // over the dp group) or the whole, identical on every dp rank (ZeRO 0: not summed over dp).
  virtual bool norm_sharded_over_dp() const { return true; }
  // Initial weights: rank 0 initialises the full arena and broadcasts it.
  void init_full_weights(float* arena, uint64_t seed);
  // All-gathers every unit of the full arena from each rank's piece, in place.
  void all_gather_units(float* arena);
  // Which weights the arena holds: changes with every update and every weights_changed().
  int64_t weights_version() const { return (generation_ << 40) + opt_->steps_taken(); }

  // Where the fp32 master weights live: the full arena (ZeRO 0-2) or this rank's pieces (3).
  virtual float* master_weights(Addressing* how) = 0;

  ExecContext ctx_;  // where the engine's ops run (the rank's context)
  ParamLayout layout_;
  Communicator& dp_;
  Communicator& pp_;  // the pipeline's stages: the gradient norm's last sum
  ShardPlan plan_;
  GradReducer reducer_;
  TpGradSync tp_sync_;   // sum_partial(unit) before a unit's gradient leaves for the dp group
  DeviceScalars norm2_;  // the gradient's sum of squares on the device, per unit (queue_gradient_norm)
  std::unique_ptr<AdamW> opt_;
  Tensor g_;  // gradients: the full arena (ZeRO 0, 1) or this rank's compact shard (ZeRO 2, 3)
  int micro_batches_ = 1, micro_ = 0;
  std::vector<WorkPtr> pending_;
  // How long the compute stream stalled on communication this step (last_wait_s): timed on the
  // stream, so the host need not wait; on the CPU, the host clock around the waits.
  StreamTimer stall_;
  bool shard_optimizer_ = false;  // AdamW moments over this rank's pieces (else the full arena)
  int64_t generation_ = 0;
};

// ZeRO 0-2: every rank holds the full fp32 weights (initialised from the seed by rank 0 and
// broadcast) and, when training in bf16, their bf16 copy.
class FullWeightsEngine : public DpEngineBase {
 public:
  const float* weights(int u) override { return w_.data<float>() + layout_.unit_begin(u); }
  const uint16_t* weights_bf16(int u) override {
    return w16_.enabled() ? w16_.unit(u, weights(u), weights_version()) : nullptr;
  }
  void keep_bf16_weights() override { w16_.enable(ctx_, layout_); }
  void gather_weights(float* out) override;

 protected:
  FullWeightsEngine(const ExecContext& ctx, const ParallelConfig& p, const OptimConfig& o, ParamLayout layout,
                    Communicator& dp, Communicator& tp, Communicator& pp, bool shard_optimizer, uint64_t seed);
  float* master_weights(Addressing* how) override {
    *how = Addressing::kArena;
    return w_.data<float>();
  }

  Tensor w_;         // the full arena
  Bf16Weights w16_;  // enabled by keep_bf16_weights()
};

}  // namespace ft

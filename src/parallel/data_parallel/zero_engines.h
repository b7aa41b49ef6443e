// The engines of ZeRO stages 0–3 (see param_engine.h for what each stage shards).
#pragma once

#include <vector>

#include "parallel/data_parallel/buffer_pool.h"
#include "parallel/data_parallel/engine_base.h"
#include "parallel/data_parallel/unit_grad_scatter.h"

namespace ft {

class Zero0Engine final : public FullWeightsEngine {
 public:
  Zero0Engine(const ExecContext& ctx, const ParallelConfig& p, const OptimConfig& o, ParamLayout layout,
              Communicator& dp, Communicator& tp, Communicator& pp, uint64_t seed);
  float* grads(int u) override { return g_.data<float>() + layout_.unit_begin(u); }
  void begin_step(int micro_batches) override;
  void after_backward(int unit) override;
  void queue_gradient_norm() override;
  void queue_update() override;
  void end_update() override;
  bool update_capturable() const override { return true; }

 private:
  bool norm_sharded_over_dp() const override { return false; }  // every dp rank holds the whole gradient
  struct Bucket {
    int64_t begin, end;  // arena range (whole units)
    int units, remaining;
  };
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_unit_;
};

// Stages 1 and 2 keep full weights; stage 1 also full gradients (reduce-scattered in place on
// the last micro-batch), stage 2 only the rank's gradient shard (each micro-batch's unit
// gradient is reduce-scattered from a short-lived buffer and accumulated into the shard).
class Zero12Engine final : public FullWeightsEngine {
 public:
  Zero12Engine(const ExecContext& ctx, const ParallelConfig& p, const OptimConfig& o, ParamLayout layout,
               Communicator& dp, Communicator& tp, Communicator& pp, uint64_t seed);
  float* grads(int u) override;
  void after_backward(int unit) override;
  void queue_gradient_norm() override;
  void queue_update() override;
  void end_update() override;  // the updated pieces all-gathered (collectives: not capturable)

 private:
  Addressing grad_addressing() const { return stage_ == 1 ? Addressing::kArena : Addressing::kCompact; }
  int stage_;
  UnitGradScatter scatter_;  // stage 2
};

// Stage 3: weights too. A unit's weights are gathered on first use (prefetched one unit ahead in
// the direction of the pass), freed after its forward and after its backward.
class Zero3Engine final : public DpEngineBase {
 public:
  Zero3Engine(const ExecContext& ctx, const ParallelConfig& p, const OptimConfig& o, ParamLayout layout,
              Communicator& dp, Communicator& tp, Communicator& pp, uint64_t seed);
  const float* weights(int u) override;
  float* grads(int u) override { return scatter_.unit_grads(u); }
  void before_forward(int u) override;
  void after_forward(int u) override;
  void before_backward(int u) override;
  void after_backward(int u) override;
  void begin_micro_batch(int index) override;
  void queue_gradient_norm() override;
  void queue_update() override;
  bool update_capturable() const override { return true; }
  void gather_weights(float* out) override;

 private:
  float* master_weights(Addressing* how) override {
    *how = Addressing::kCompact;
    return w_.data<float>();
  }
  void start_gather(int u);
  void release_weights(int u);
  Tensor w_;  // compact shard
  std::vector<Tensor> gathered_;
  std::vector<WorkPtr> gathering_;
  BufferPool wpool_{MemCategory::kParameters};
  UnitGradScatter scatter_;
  bool training_ = false;
};

}  // namespace ft

// The engines of ZeRO stages 0–3 (see param_engine.h for what each stage shards).
#pragma once

#include <deque>
#include <vector>

#include "parallel/data_parallel/buffer_pool.h"
#include "parallel/data_parallel/engine_base.h"

namespace ft {

class Zero0Engine final : public DpEngineBase {
 public:
  Zero0Engine(const ExecContext& ctx, const ParallelConfig& p, const OptimConfig& o, ParamLayout layout,
              Communicator& dp, Communicator& tp, uint64_t seed);
  const float* weights(int u) override { return w_.data<float>() + layout_.unit_begin(u); }
  float* grads(int u) override { return g_.data<float>() + layout_.unit_begin(u); }
  const uint16_t* weights_bf16(int u) override {
    return w16_.enabled() ? w16_.unit(u, weights(u), weights_version()) : nullptr;
  }
  void keep_bf16_weights() override { w16_.enable(ctx_, layout_); }
  void begin_step(int micro_batches) override;
  void after_backward(int unit) override;
  double finish_gradients() override;
  void optimizer_step(double lr, float grad_scale) override;
  void gather_weights(float* out) override;

 private:
  float* master_weights(Addressing* how) override {
    *how = Addressing::kArena;
    return w_.data<float>();
  }
  struct Bucket {
    int64_t begin, end;  // arena range (whole units)
    int units, remaining;
  };
  Tensor w_, g_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_unit_;
};

// Stages 1 and 2 keep full weights; stage 1 also full gradients (reduce-scattered in place on
// the last micro-batch), stage 2 only the rank's gradient shard (each micro-batch's unit
// gradient is reduce-scattered from a short-lived buffer and accumulated into the shard).
class Zero12Engine final : public DpEngineBase {
 public:
  Zero12Engine(const ExecContext& ctx, const ParallelConfig& p, const OptimConfig& o, ParamLayout layout,
               Communicator& dp, Communicator& tp, uint64_t seed);
  const float* weights(int u) override { return w_.data<float>() + layout_.unit_begin(u); }
  float* grads(int u) override;
  const uint16_t* weights_bf16(int u) override {
    return w16_.enabled() ? w16_.unit(u, weights(u), weights_version()) : nullptr;
  }
  void keep_bf16_weights() override { w16_.enable(ctx_, layout_); }
  void begin_step(int micro_batches) override;
  void after_backward(int unit) override;
  double finish_gradients() override;
  void optimizer_step(double lr, float grad_scale) override;
  void gather_weights(float* out) override;

 private:
  float* master_weights(Addressing* how) override {
    *how = Addressing::kArena;
    return w_.data<float>();
  }
  struct InFlight {
    WorkPtr work;
    int unit;
    Tensor full, piece;
  };
  void drain(size_t keep);  // completes in-flight reductions until at most `keep` remain
  int stage_;
  Tensor w_, g_;                    // w_: full arena; g_: full arena (stage 1) or the compact shard (stage 2)
  std::vector<Tensor> unit_grads_;  // stage 2: the unit gradient buffers of this micro-batch
  std::deque<InFlight> in_flight_;
  BufferPool pool_{MemCategory::kGradients};
};

// Stage 3: weights too. A unit's weights are gathered on first use (prefetched one unit ahead in
// the direction of the pass), freed after its forward and after its backward.
class Zero3Engine final : public DpEngineBase {
 public:
  Zero3Engine(const ExecContext& ctx, const ParallelConfig& p, const OptimConfig& o, ParamLayout layout,
              Communicator& dp, Communicator& tp, uint64_t seed);
  const float* weights(int u) override;
  float* grads(int u) override;
  void before_forward(int u) override;
  void after_forward(int u) override;
  void before_backward(int u) override;
  void after_backward(int u) override;
  void begin_step(int micro_batches) override;
  void begin_micro_batch(int index) override;
  double finish_gradients() override;
  void optimizer_step(double lr, float grad_scale) override;
  void gather_weights(float* out) override;

 private:
  float* master_weights(Addressing* how) override {
    *how = Addressing::kCompact;
    return w_.data<float>();
  }
  struct InFlight {
    WorkPtr work;
    int unit;
    Tensor full, piece;
  };
  void start_gather(int u);
  void release_weights(int u);
  void drain(size_t keep);
  Tensor w_, g_;  // compact shards
  std::vector<Tensor> gathered_, unit_grads_;
  std::vector<WorkPtr> gathering_;
  std::deque<InFlight> in_flight_;
  BufferPool wpool_{MemCategory::kParameters}, gpool_{MemCategory::kGradients};
  bool training_ = false;
};

}  // namespace ft

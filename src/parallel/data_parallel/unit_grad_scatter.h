// UnitGradScatter: gradients that live as a full unit only during the unit's backward (ZeRO 2 and
// 3). Each unit's gradient is accumulated in a short-lived buffer; when its backward is done it
// is summed over the tp ranks that hold parts of it, reduce-scattered over the dp group, and this
// rank's piece is added into the rank's compact gradient shard. One reduction stays in flight
// while the next unit's backward runs. The compute stream waits for a reduction before it adds
// the piece (the host does not, on a GPU); the stall is timed on the engine's StreamTimer.
//
//   UnitGradScatter scatter(ctx, layout, plan, reducer, tp_sync, stall);
//   float* g = scatter.unit_grads(u);              // backward of unit u accumulates here
//   scatter.reduce(u, shard);                      // after_backward(u)
//   scatter.drain(shard, 0);                       // queue_gradient_norm(): every piece added
#pragma once

#include <deque>
#include <vector>

#include "model/param_layout.h"
#include "parallel/data_parallel/buffer_pool.h"
#include "parallel/data_parallel/grad_reducer.h"
#include "parallel/data_parallel/shard_plan.h"
#include "parallel/tensor_parallel/tensor_parallel.h"
#include "tensor/stream_timer.h"

namespace ft {

class UnitGradScatter {
 public:
  UnitGradScatter(const ExecContext& ctx, const ParamLayout& layout, const ShardPlan& plan, GradReducer& reducer,
                  TpGradSync& tp_sync, StreamTimer& stall);
  // Unit u's full gradient buffer for this micro-batch (zeroed on first use).
  float* unit_grads(int u);
  // Unit u's gradient is complete: starts its reduction, whose piece is added into `shard` (the
  // compact shard, ShardPlan::shard_offset addressing), and completes older ones until one is
  // left in flight.
  void reduce(int u, float* shard);
  // Completes reductions until at most `keep` are in flight.
  void drain(float* shard, size_t keep);

 private:
  struct InFlight {
    WorkPtr work;
    int unit;
    Tensor full, piece;
  };
  ExecContext ctx_;
  const ParamLayout& layout_;
  const ShardPlan& plan_;
  GradReducer& reducer_;
  TpGradSync& tp_sync_;
  StreamTimer& stall_;
  std::vector<Tensor> unit_grads_;  // per unit; defined while its backward accumulates
  std::deque<InFlight> in_flight_;
  BufferPool pool_{MemCategory::kGradients};
};

}  // namespace ft

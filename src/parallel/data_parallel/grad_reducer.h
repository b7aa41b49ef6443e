// GradReducer: sums gradients over the data-parallel group with the configured compression —
// fp32 or bf16 on the wire, or PowerSGD (low-rank factors with error feedback; parallel/
// data_parallel/powersgd_compression.h). Whole ranges are all-reduced (ZeRO 0); single units are
// reduce-scattered so each rank receives only its piece (ZeRO 1, 2, 3).
#pragma once

#include <memory>

#include "model/param_layout.h"
#include "parallel/comm/comm.h"
#include "parallel/data_parallel/shard_plan.h"
#include "parallel/parallel_config.h"
#include "tensor/exec_context.h"

namespace ft {

class PowerSGD;

class GradReducer {
 public:
  GradReducer(const ExecContext& ctx, Communicator& dp, const ParallelConfig& p, const ParamLayout& layout,
              const ShardPlan& plan);
  ~GradReducer();
  // The optimizer step about to be reduced (PowerSGD starts after its warm-up steps).
  void set_step(int64_t step) { step_ = step; }

  // In place over arena range [begin, end); `arena` is the full gradient arena.
  WorkPtr all_reduce(float* arena, int64_t begin, int64_t end);
  // Unit u's full gradient (unit_grads points at the unit's first element) summed over the
  // group; this rank's piece is written to piece_out (it may alias the piece inside unit_grads).
  WorkPtr reduce_scatter(float* piece_out, float* unit_grads, int unit);

 private:
  ExecContext ctx_;
  Communicator& dp_;
  Wire wire_;
  const ParamLayout& layout_;
  const ShardPlan& plan_;
  PowerSGD* active_powersgd() const { return step_ >= warmup_ ? powersgd_.get() : nullptr; }
  std::unique_ptr<PowerSGD> powersgd_;
  int64_t warmup_ = 0, step_ = 0;
};

}  // namespace ft

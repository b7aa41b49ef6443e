#include "parallel/data_parallel/unit_grad_scatter.h"

#include <utility>

#include "kernels/ops.h"

namespace ft {

UnitGradScatter::UnitGradScatter(const ExecContext& ctx, const ParamLayout& layout, const ShardPlan& plan,
                                 GradReducer& reducer, TpGradSync& tp_sync, StreamTimer& stall)
    : ctx_(ctx), layout_(layout), plan_(plan), reducer_(reducer), tp_sync_(tp_sync), stall_(stall) {
  pool_ = BufferPool(MemCategory::kGradients, ctx.device);
  unit_grads_.resize(static_cast<size_t>(layout_.num_units()));
}

float* UnitGradScatter::unit_grads(int u) {
  Tensor& t = unit_grads_[static_cast<size_t>(u)];
  if (!t.defined()) {  // first gradient of this unit in this micro-batch
    t = pool_.acquire(layout_.unit_size(u));
    mem_zero(ctx_, t.raw(), t.device(), static_cast<size_t>(layout_.unit_size(u)) * sizeof(float));
  }
  return t.data<float>();
}

void UnitGradScatter::reduce(int u, float* shard) {
  Tensor full = std::move(unit_grads_[static_cast<size_t>(u)]);
  unit_grads_[static_cast<size_t>(u)] = Tensor();
  tp_sync_.sum_partial(full.data<float>(), u);
  Tensor piece = pool_.acquire(plan_.piece_size(u));
  WorkPtr w = reducer_.reduce_scatter(piece.data<float>(), full.data<float>(), u);
  in_flight_.push_back({w, u, full, piece});
  drain(shard, 1);  // one reduction in flight while the next unit's backward runs
}

void UnitGradScatter::drain(float* shard, size_t keep) {
  while (in_flight_.size() > keep) {
    InFlight f = std::move(in_flight_.front());
    in_flight_.pop_front();
    stall_.begin();
    f.work->stream_wait(ctx_);  // what follows on the stream (the add, the buffers' reuse) runs after it
    stall_.end();
    ops::add_inplace(ctx_, shard + plan_.shard_offset(f.unit), f.piece.data<float>(), plan_.piece_size(f.unit));
    pool_.release(f.full);
    pool_.release(f.piece);
  }
}

}  // namespace ft

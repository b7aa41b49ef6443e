#include "parallel/data_parallel/zero_engines.h"

namespace ft {

Zero12Engine::Zero12Engine(const ExecContext& ctx, const ParallelConfig& p, const OptimConfig& o, ParamLayout layout,
                           Communicator& dp, Communicator& tp, Communicator& pp, uint64_t seed)
    : FullWeightsEngine(ctx, p, o, std::move(layout), dp, tp, pp, /*shard_optimizer=*/true, seed),
      stage_(static_cast<int>(p.zero)),
      scatter_(ctx_, layout_, plan_, reducer_, tp_sync_, stall_) {
  g_ = Tensor::zeros({stage_ == 1 ? layout_.total() : plan_.shard_size()}, DType::kF32, MemCategory::kGradients,
                     ctx.device);
}

float* Zero12Engine::grads(int u) {
  if (stage_ == 1) return g_.data<float>() + layout_.unit_begin(u);
  return scatter_.unit_grads(u);
}

void Zero12Engine::after_backward(int u) {
  if (stage_ == 1) {
    if (!last_micro_batch()) return;
    float* unit = g_.data<float>() + layout_.unit_begin(u);
    tp_sync_.sum_partial(unit, u);
    pending_.push_back(reducer_.reduce_scatter(g_.data<float>() + plan_.piece_begin(u), unit, u));
    return;
  }
  scatter_.reduce(u, g_.data<float>());
}

void Zero12Engine::queue_gradient_norm() {
  wait_pending();
  scatter_.drain(g_.data<float>(), 0);
  sharded_sum_squares(g_.data<float>(), grad_addressing());
}

void Zero12Engine::queue_update() {
  opt_->queue_step(w_.data<float>(), Addressing::kArena, g_.data<float>(), grad_addressing());
}

void Zero12Engine::end_update() {
  all_gather_units(w_.data<float>());
}

}  // namespace ft

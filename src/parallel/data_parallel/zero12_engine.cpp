#include "kernels/ops.h"
#include "parallel/data_parallel/zero_engines.h"

namespace ft {

Zero12Engine::Zero12Engine(const ExecContext& ctx, const ParallelConfig& p, const OptimConfig& o, ParamLayout layout,
                           Communicator& dp, Communicator& tp, uint64_t seed)
    : DpEngineBase(ctx, p, o, std::move(layout), dp, tp, /*shard_optimizer=*/true), stage_(static_cast<int>(p.zero)) {
  w_ = Tensor::zeros({layout_.total()}, DType::kF32, MemCategory::kParameters);
  g_ = Tensor::zeros({stage_ == 1 ? layout_.total() : plan_.shard_size()}, DType::kF32, MemCategory::kGradients);
  unit_grads_.resize(static_cast<size_t>(layout_.num_units()));
  init_full_weights(w_.data<float>(), seed);
}

float* Zero12Engine::grads(int u) {
  if (stage_ == 1) return g_.data<float>() + layout_.unit_begin(u);
  Tensor& t = unit_grads_[static_cast<size_t>(u)];
  if (!t.defined()) {  // first gradient of this unit in this micro-batch
    t = pool_.acquire(layout_.unit_size(u));
    std::fill_n(t.data<float>(), layout_.unit_size(u), 0.0f);
  }
  return t.data<float>();
}

void Zero12Engine::begin_step(int micro_batches) {
  DpEngineBase::begin_step(micro_batches);
  g_.zero_();
}

void Zero12Engine::after_backward(int u) {
  if (stage_ == 1) {
    if (!last_micro_batch()) return;
    float* unit = g_.data<float>() + layout_.unit_begin(u);
    tp_sync_.sum_partial(unit, u);
    pending_.push_back(reducer_.reduce_scatter(g_.data<float>() + plan_.piece_begin(u), unit, u));
    return;
  }
  Tensor full = std::move(unit_grads_[static_cast<size_t>(u)]);
  unit_grads_[static_cast<size_t>(u)] = Tensor();
  tp_sync_.sum_partial(full.data<float>(), u);
  Tensor piece = pool_.acquire(plan_.piece_size(u));
  WorkPtr w = reducer_.reduce_scatter(piece.data<float>(), full.data<float>(), u);
  in_flight_.push_back({w, u, full, piece});
  drain(1);  // one reduction in flight while the next unit's backward runs
}

void Zero12Engine::drain(size_t keep) {
  while (in_flight_.size() > keep) {
    InFlight f = std::move(in_flight_.front());
    in_flight_.pop_front();
    f.work->wait();
    ops::add_inplace(ctx_, g_.data<float>() + plan_.shard_offset(f.unit), f.piece.data<float>(),
                     plan_.piece_size(f.unit));
    pool_.release(f.full);
    pool_.release(f.piece);
  }
}

double Zero12Engine::finish_gradients() {
  wait_pending();
  auto t0 = std::chrono::steady_clock::now();
  drain(0);
  wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sharded_sum_squares(g_.data<float>(), stage_ == 1 ? Addressing::kArena : Addressing::kCompact);
}

void Zero12Engine::optimizer_step(double lr, float grad_scale) {
  before_update();
  opt_->step(w_.data<float>(), Addressing::kArena, g_.data<float>(),
             stage_ == 1 ? Addressing::kArena : Addressing::kCompact, lr, grad_scale);
  all_gather_units(w_.data<float>());
}

void Zero12Engine::gather_weights(float* out) {
  Tensor::borrow(out, {layout_.total()}, DType::kF32).copy_from(w_);
}

}  // namespace ft

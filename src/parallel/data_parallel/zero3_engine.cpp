#include "parallel/data_parallel/zero_engines.h"

namespace ft {

Zero3Engine::Zero3Engine(const ExecContext& ctx, const ParallelConfig& p, const OptimConfig& o, ParamLayout layout,
                         Communicator& dp, Communicator& tp, Communicator& pp, uint64_t seed)
    : DpEngineBase(ctx, p, o, std::move(layout), dp, tp, pp, /*shard_optimizer=*/true),
      scatter_(ctx_, layout_, plan_, reducer_, tp_sync_, stall_) {
  wpool_ = BufferPool(MemCategory::kParameters, ctx.device);
  w_ = Tensor::zeros({plan_.shard_size()}, DType::kF32, MemCategory::kParameters, ctx.device);
  g_ = Tensor::zeros({plan_.shard_size()}, DType::kF32, MemCategory::kGradients, ctx.device);
  const size_t U = static_cast<size_t>(layout_.num_units());
  gathered_.resize(U);
  gathering_.resize(U);
  {  // rank 0 initialises and broadcasts the full weights once; each rank keeps its pieces
    Tensor full = Tensor::zeros({layout_.total()}, DType::kF32, MemCategory::kCommunication, ctx.device);
    init_full_weights(full.data<float>(), seed);
    const ExecContext& ctx = ctx_;
    for (int u = 0; u < plan_.num_units(); ++u)
      mem_copy(ctx, w_.data<float>() + plan_.shard_offset(u), w_.device(), full.data<float>() + plan_.piece_begin(u),
               full.device(), static_cast<size_t>(plan_.piece_size(u)) * 4);
  }
}

void Zero3Engine::start_gather(int u) {
  size_t i = static_cast<size_t>(u);
  if (gathered_[i].defined()) return;
  gathered_[i] = wpool_.acquire(layout_.unit_size(u));
  gathering_[i] = dp_.all_gather_async(gathered_[i].data<float>(), w_.data<float>() + plan_.shard_offset(u),
                                       plan_.piece_size(u) * 4);
}

const float* Zero3Engine::weights(int u) {
  size_t i = static_cast<size_t>(u);
  start_gather(u);
  if (gathering_[i]) {  // the unit's ops, next on the compute stream, run after its gather
    stream_wait_timed(*gathering_[i]);
    gathering_[i].reset();
  }
  return gathered_[i].data<float>();
}

void Zero3Engine::release_weights(int u) {
  size_t i = static_cast<size_t>(u);
  if (!gathered_[i].defined()) return;
  if (gathering_[i]) gathering_[i]->stream_wait(ctx_);  // never reuse a buffer a gather still writes
  gathering_[i].reset();
  wpool_.release(std::move(gathered_[i]));
  gathered_[i] = Tensor();
}

void Zero3Engine::before_forward(int u) {
  start_gather(u);
  if (u + 1 < layout_.num_units()) start_gather(u + 1);  // prefetch the next unit
}

void Zero3Engine::after_forward(int u) {
  // The head's weights are used again at once by its backward; keep them while training.
  if (training_ && u == layout_.num_units() - 1) return;
  release_weights(u);
}

void Zero3Engine::before_backward(int u) {
  start_gather(u);
  // Prefetch the previous unit; the embedding's backward reads no weights (unit 0 is skipped).
  if (u - 1 >= 1) start_gather(u - 1);
}

void Zero3Engine::after_backward(int u) {
  release_weights(u);
  scatter_.reduce(u, g_.data<float>());
}

void Zero3Engine::begin_micro_batch(int index) {
  DpEngineBase::begin_micro_batch(index);
  training_ = true;
}

void Zero3Engine::queue_gradient_norm() {
  training_ = false;
  scatter_.drain(g_.data<float>(), 0);
  for (int u = 0; u < layout_.num_units(); ++u) release_weights(u);
  sharded_sum_squares(g_.data<float>(), Addressing::kCompact);
}

void Zero3Engine::queue_update() {
  opt_->queue_step(w_.data<float>(), Addressing::kCompact, g_.data<float>(), Addressing::kCompact);
}

void Zero3Engine::gather_weights(float* out) {
  for (int u = 0; u < plan_.num_units(); ++u)
    dp_.all_gather(out + layout_.unit_begin(u), w_.data<float>() + plan_.shard_offset(u), plan_.piece_size(u) * 4);
}

}  // namespace ft

// ZeRO stage 0 (DDP): every rank holds everything; gradient buckets (runs of whole units, about
// parallel.bucket_mb each, in backward order) are all-reduced on the communication thread as
// soon as the last micro-batch's backward has finished every unit of the bucket.
#include "kernels/ops.h"
#include "parallel/data_parallel/zero_engines.h"

namespace ft {

Zero0Engine::Zero0Engine(const ExecContext& ctx, const ParallelConfig& p, const OptimConfig& o, ParamLayout layout,
                         Communicator& dp, Communicator& tp, Communicator& pp, uint64_t seed)
    : FullWeightsEngine(ctx, p, o, std::move(layout), dp, tp, pp, /*shard_optimizer=*/false, seed) {
  g_ = Tensor::zeros({layout_.total()}, DType::kF32, MemCategory::kGradients, ctx.device);
  // Buckets in backward order: from the last unit down, closing one when it reaches bucket_mb.
  const int64_t target = static_cast<int64_t>(p.bucket_mb * 1024 * 1024 / 4);
  bucket_of_unit_.assign(static_cast<size_t>(layout_.num_units()), 0);
  for (int u = layout_.num_units() - 1; u >= 0; --u) {
    if (buckets_.empty() || buckets_.back().end - buckets_.back().begin >= target)
      buckets_.push_back({layout_.unit_begin(u), layout_.unit_end(u), 0, 0});
    Bucket& b = buckets_.back();
    b.begin = layout_.unit_begin(u);
    ++b.units;
    bucket_of_unit_[static_cast<size_t>(u)] = static_cast<int>(buckets_.size()) - 1;
  }
}

void Zero0Engine::begin_step(int micro_batches) {
  DpEngineBase::begin_step(micro_batches);
  for (auto& b : buckets_) b.remaining = b.units;
}

void Zero0Engine::after_backward(int unit) {
  if (!last_micro_batch()) return;
  tp_sync_.sum_partial(g_.data<float>() + layout_.unit_begin(unit), unit);
  Bucket& b = buckets_[static_cast<size_t>(bucket_of_unit_[static_cast<size_t>(unit)])];
  if (--b.remaining == 0) pending_.push_back(reducer_.all_reduce(g_.data<float>(), b.begin, b.end));
}

void Zero0Engine::queue_gradient_norm() {
  wait_pending();
  norm2_.zero();  // one slot holds it all (the others stay 0: the in-order sum is the slot's bits)
  tp_sync_.sum_squares(ctx_, norm2_.at(0), g_.data<float>(), 0, layout_.total());
}

void Zero0Engine::queue_update() {
  // Every rank updates every weight: with a bf16 copy, AdamW rounds each weight as it writes it.
  opt_->queue_step(w_.data<float>(), Addressing::kArena, g_.data<float>(), Addressing::kArena,
                   w16_.enabled() ? w16_.arena() : nullptr);
}

void Zero0Engine::end_update() {
  if (w16_.enabled()) w16_.mark_current(weights_version());
}

}  // namespace ft

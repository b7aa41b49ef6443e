#include "parallel/data_parallel/engine_base.h"

#include <array>

#include "kernels/ops.h"
#include "tensor/backend.h"
#include "tensor/device_runtime.h"

namespace ft {

DpEngineBase::DpEngineBase(const ExecContext& ctx, const ParallelConfig& p, const OptimConfig& o, ParamLayout layout,
                           Communicator& dp, Communicator& tp, Communicator& pp, bool shard_optimizer)
    : ctx_(ctx),
      layout_(std::move(layout)),
      dp_(dp),
      pp_(pp),
      plan_(layout_, dp.rank(), dp.size()),
      reducer_(ctx, dp, p, layout_, plan_),
      tp_sync_(ctx, layout_, tp),
      norm2_(ctx, std::max(plan_.num_units(), 1)),
      stall_(ctx) {
  shard_optimizer_ = shard_optimizer;
  AdamW::Ranges all = {{0, layout_.total()}};
  opt_ = std::make_unique<AdamW>(ctx_, o, layout_, shard_optimizer ? plan_.ranges() : all);
}

void DpEngineBase::begin_step(int micro_batches) {
  micro_batches_ = micro_batches;
  micro_ = 0;
  stall_.restart();
  reducer_.set_step(opt_->steps_taken());
  g_.zero_();
}

void DpEngineBase::wait_pending() {
  stall_.begin();
  for (auto& w : pending_) w->stream_wait(ctx_);
  stall_.end();
  pending_.clear();
}

void DpEngineBase::stream_wait_timed(Work& w) {
  stall_.begin();
  w.stream_wait(ctx_);
  stall_.end();
}

void DpEngineBase::sharded_sum_squares(const float* grads, Addressing a) {
  norm2_.zero();  // one device slot per unit
  for (int u = 0; u < plan_.num_units(); ++u)
    tp_sync_.sum_squares(ctx_, norm2_.at(u),
                         grads + (a == Addressing::kArena ? plan_.piece_begin(u) : plan_.shard_offset(u)),
                         plan_.piece_begin(u), plan_.piece_begin(u) + plan_.piece_size(u));
}

double DpEngineBase::reduce_gradient_norm(double s, std::span<double> over_stages) {
  if (norm_sharded_over_dp()) dp_.all_reduce(&s, 1);
  s = tp_sync_.all_reduce(s);
  // The stages hold disjoint parameters: their sums add up. Every rank makes this call, one stage
  // or many, so that every rank runs the same collectives.
  // The norm at index 1 (param_engine.h): {over_stages[0], norm, over_stages[1], ...}. Host
  // scalars on the stack, as every host scalar a collective sums: a communicator of device buffers
  // tells them from device memory by where they live (NcclComm's host path).
  const size_t at = over_stages.empty() ? 0 : 1;
  std::array<double, kMaxStageSums + 1> sums{};
  FT_CHECK(over_stages.size() <= kMaxStageSums, "{} values to sum over the stages (at most {})", over_stages.size(),
           kMaxStageSums);
  for (size_t i = 0, j = 0; i <= over_stages.size(); ++i) sums[i] = i == at ? s : over_stages[j++];
  pp_.all_reduce(sums.data(), static_cast<int64_t>(over_stages.size() + 1));
  for (size_t i = 0; i < over_stages.size(); ++i) over_stages[i] = sums[i < at ? i : i + 1];
  return sums[at];
}

void DpEngineBase::use_norm_slots(DeviceScalars slots) {
  FT_CHECK(slots.size() == norm2_.size(), "{} gradient-norm slots for {}", slots.size(), norm2_.size());
  norm2_ = std::move(slots);
}

void DpEngineBase::init_full_weights(float* arena, uint64_t seed) {
  const size_t bytes = static_cast<size_t>(layout_.total()) * 4;
  if (dp_.rank() == 0) {
    if (ctx_.on_host()) {
      layout_.init(arena, seed);
    } else if (backend_of(ctx_).computes) {  // drawn on the host (the initialiser is host code), then copied
      float* host = static_cast<float*>(mem_alloc_host(ctx_.device, bytes, MemCategory::kWorkspace));
      layout_.init(host, seed);
      mem_copy(ctx_, arena, ctx_.device, host, Device::kCPU, bytes);
      synchronize(ctx_);
      mem_free_host(ctx_.device, host, bytes, MemCategory::kWorkspace);
    }
  }
  dp_.broadcast(arena, static_cast<int64_t>(bytes), 0);
}

void DpEngineBase::all_gather_units(float* arena) {
  std::vector<WorkPtr> works;
  for (int u = 0; u < plan_.num_units(); ++u)
    works.push_back(
        dp_.all_gather_async(arena + layout_.unit_begin(u), arena + plan_.piece_begin(u), plan_.piece_size(u) * 4));
  for (auto& w : works) w->stream_wait(ctx_);  // the weights' next readers are on the stream
}

// Checkpoint state: piece r of every unit, whatever the stage. Moments over the full arena (ZeRO 0)
// are indexed like the arena; weights likewise unless ZeRO 3 keeps only the pieces. w, m and v
// are the checkpointer's host buffers: each piece is one device-to-host copy (host-to-device on
// import).
void DpEngineBase::export_state(const ExecContext& ctx, float* w, float* m, float* v) {
  const Device dev = ctx.device, host = Device::kCPU;
  Addressing wa;
  const float* weights = master_weights(&wa);
  const float* mom[2] = {opt_->exp_avg().data<float>(), opt_->exp_avg_sq().data<float>()};
  for (int u = 0; u < plan_.num_units(); ++u) {
    const size_t n = static_cast<size_t>(plan_.piece_size(u)) * 4;
    const int64_t arena = plan_.piece_begin(u), compact = plan_.shard_offset(u);
    mem_copy(ctx, w + compact, host, weights + (wa == Addressing::kArena ? arena : compact), dev, n);
    mem_copy(ctx, m + compact, host, mom[0] + (shard_optimizer_ ? compact : arena), dev, n);
    mem_copy(ctx, v + compact, host, mom[1] + (shard_optimizer_ ? compact : arena), dev, n);
  }
}

void DpEngineBase::import_state(const float* w, const float* m, const float* v, int64_t optimizer_steps) {
  const ExecContext& ctx = ctx_;
  const Device dev = ctx.device, host = Device::kCPU;
  Addressing wa;
  float* weights = master_weights(&wa);
  float* mom[2] = {opt_->exp_avg().data<float>(), opt_->exp_avg_sq().data<float>()};
  for (int u = 0; u < plan_.num_units(); ++u) {
    const size_t n = static_cast<size_t>(plan_.piece_size(u)) * 4;
    const int64_t arena = plan_.piece_begin(u), compact = plan_.shard_offset(u);
    mem_copy(ctx, weights + (wa == Addressing::kArena ? arena : compact), dev, w + compact, host, n);
    mem_copy(ctx, mom[0] + (shard_optimizer_ ? compact : arena), dev, m + compact, host, n);
    mem_copy(ctx, mom[1] + (shard_optimizer_ ? compact : arena), dev, v + compact, host, n);
  }
  if (wa == Addressing::kArena) all_gather_units(weights);  // every rank holds the full weights
  if (!shard_optimizer_) {
    all_gather_units(mom[0]);
    all_gather_units(mom[1]);
  }
  opt_->set_steps_taken(optimizer_steps);
  weights_changed();  // a bf16 copy of the weights (bf16 training) is stale now
}

FullWeightsEngine::FullWeightsEngine(const ExecContext& ctx, const ParallelConfig& p, const OptimConfig& o,
                                     ParamLayout layout, Communicator& dp, Communicator& tp, Communicator& pp,
                                     bool shard_optimizer, uint64_t seed)
    : DpEngineBase(ctx, p, o, std::move(layout), dp, tp, pp, shard_optimizer) {
  w_ = Tensor::zeros({layout_.total()}, DType::kF32, MemCategory::kParameters, ctx.device);
  init_full_weights(w_.data<float>(), seed);
}

void FullWeightsEngine::gather_weights(float* out) {
  Tensor::borrow(out, {layout_.total()}, DType::kF32).copy_from(w_);
}

}  // namespace ft

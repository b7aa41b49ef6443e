#include "dist/data_parallel/engine_base.h"

#include "kernels/ops.h"
#include "util/clock.h"

namespace ft {

DpEngineBase::DpEngineBase(const ParallelConfig& p, const OptimConfig& o, ParamLayout layout, Communicator& dp,
                           Communicator& tp, bool shard_optimizer)
    : layout_(std::move(layout)),
      dp_(dp),
      plan_(layout_, dp.rank(), dp.size()),
      reducer_(dp, p, layout_, plan_),
      tp_sync_(layout_, tp) {
  AdamW::Ranges all = {{0, layout_.total()}};
  opt_ = std::make_unique<AdamW>(o, layout_, shard_optimizer ? plan_.ranges() : all);
}

void DpEngineBase::begin_step(int micro_batches) {
  micro_batches_ = micro_batches;
  micro_ = 0;
  wait_s_ = 0;
  reducer_.set_step(opt_->steps_taken());
}

void DpEngineBase::wait_pending() {
  double t0 = now_seconds();
  for (auto& w : pending_) w->wait();
  pending_.clear();
  wait_s_ += now_seconds() - t0;
}

double DpEngineBase::sharded_sum_squares(const float* grads, Addressing a) {
  double s = 0;
  for (int u = 0; u < plan_.num_units(); ++u)
    s += tp_sync_.sum_squares(grads + (a == Addressing::kArena ? plan_.piece_begin(u) : plan_.shard_offset(u)),
                              plan_.piece_begin(u), plan_.piece_begin(u) + plan_.piece_size(u));
  dp_.all_reduce(&s, 1);
  return tp_sync_.all_reduce(s);
}

void DpEngineBase::init_full_weights(float* arena, uint64_t seed) {
  if (dp_.rank() == 0) layout_.init(arena, seed);
  dp_.broadcast(arena, layout_.total() * 4, 0);
}

void DpEngineBase::all_gather_units(float* arena) {
  std::vector<WorkPtr> works;
  for (int u = 0; u < plan_.num_units(); ++u)
    works.push_back(dp_.all_gather_async(arena + layout_.unit_begin(u), arena + plan_.piece_begin(u),
                                         plan_.piece_size(u) * 4));
  for (auto& w : works) w->wait();
}

}  // namespace ft

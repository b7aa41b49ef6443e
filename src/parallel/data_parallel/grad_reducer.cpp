#include "parallel/data_parallel/grad_reducer.h"

#include "parallel/data_parallel/powersgd_compression.h"
#include "parallel/wires.h"
#include "tensor/memory.h"

namespace ft {
namespace {
class DoneWork final : public Work {
 public:
  void wait() override {}
  bool done() override { return true; }
};
}  // namespace

GradReducer::GradReducer(const ExecContext& ctx, Communicator& dp, const ParallelConfig& p, const ParamLayout& layout,
                         const ShardPlan& plan)
    : ctx_(ctx),
      dp_(dp),
      wire_(trainer_wires(p, false).grads),
      layout_(layout),
      plan_(plan),
      warmup_(p.powersgd_warmup_steps) {
  if (p.grad_compression == GradCompression::kPowerSGD)
    powersgd_ = std::make_unique<PowerSGD>(ctx, dp, layout, static_cast<int>(p.powersgd_rank));
}

GradReducer::~GradReducer() = default;

WorkPtr GradReducer::all_reduce(float* arena, int64_t begin, int64_t end) {
  if (PowerSGD* psgd = active_powersgd()) {
    // PowerSGD works per unit (its matrices); a bucket is a run of whole units.
    for (int u = 0; u < layout_.num_units(); ++u)
      if (layout_.unit_begin(u) >= begin && layout_.unit_end(u) <= end)
        psgd->reduce_unit(arena + layout_.unit_begin(u), u);
    return std::make_shared<DoneWork>();
  }
  return dp_.all_reduce_async(arena + begin, end - begin, ReduceOp::kSum, wire_);
}

WorkPtr GradReducer::reduce_scatter(float* piece_out, float* unit_grads, int u) {
  if (PowerSGD* psgd = active_powersgd()) {
    psgd->reduce_unit(unit_grads, u);  // every rank now holds the same approximate sum
    const float* mine = unit_grads + (plan_.piece_begin(u) - layout_.unit_begin(u));
    const ExecContext& ctx = ctx_;
    mem_copy(ctx, piece_out, ctx.device, mine, ctx.device, static_cast<size_t>(plan_.piece_size(u)) * 4);
    return std::make_shared<DoneWork>();
  }
  return dp_.reduce_scatter_async(piece_out, unit_grads, plan_.piece_size(u), wire_);
}

}  // namespace ft

#include "optim/adamw_optimizer.h"

#include <algorithm>

#include "kernels/ops.h"
#include "tensor/memory.h"

namespace ft {

AdamW::AdamW(const ExecContext& ctx, const OptimConfig& cfg, const ParamLayout& layout, const Ranges& pieces)
    : ctx_(ctx), cfg_(cfg) {
  int64_t compact = 0;
  for (auto [begin, end] : pieces) {
    for (const ParamSpec& p : layout.specs()) {
      int64_t b = std::max(begin, p.offset), e = std::min(end, p.offset + p.numel());
      if (b < e) segments_.push_back({b, compact + (b - begin), e - b, p.decay});
    }
    compact += end - begin;
  }
  m_ = Tensor::zeros({compact}, DType::kF32, MemCategory::kOptimizerState, ctx.device);
  v_ = Tensor::zeros({compact}, DType::kF32, MemCategory::kOptimizerState, ctx.device);
  static_assert(sizeof(AdamwStepScalars) == 4 * sizeof(float), "AdamwStepScalars: four floats");
  scalars_ = Tensor::zeros({4}, DType::kF32, MemCategory::kWorkspace, ctx.device);
  host_scalars_ =
      static_cast<AdamwStepScalars*>(mem_alloc_host(ctx.device, sizeof(AdamwStepScalars), MemCategory::kWorkspace));
  *host_scalars_ = {};
}

AdamW::~AdamW() {
  mem_free_host(ctx_.device, host_scalars_, sizeof(AdamwStepScalars), MemCategory::kWorkspace);
}

void AdamW::begin_step(double lr, float grad_scale) {
  ++step_;
  *host_scalars_ = adamw_step_scalars(static_cast<float>(lr), static_cast<float>(cfg_.beta1),
                                      static_cast<float>(cfg_.beta2), step_, grad_scale);
}

void AdamW::queue_step(float* weights, Addressing wa, const float* grads, Addressing ga, uint16_t* weights_bf16) {
  auto* scalars = static_cast<AdamwStepScalars*>(scalars_.raw());
  mem_copy(ctx_, scalars, ctx_.device, host_scalars_, Device::kCPU, sizeof(AdamwStepScalars));
  for (const Segment& s : segments_) {
    const int64_t wo = wa == Addressing::kArena ? s.arena : s.compact;
    float* w = weights + wo;
    const float* g = grads + (ga == Addressing::kArena ? s.arena : s.compact);
    ops::adamw_step(ctx_, w, m_.data<float>() + s.compact, v_.data<float>() + s.compact,
                    weights_bf16 ? weights_bf16 + wo : nullptr, g, s.count, scalars, static_cast<float>(cfg_.beta1),
                    static_cast<float>(cfg_.beta2), static_cast<float>(cfg_.eps),
                    s.decay ? static_cast<float>(cfg_.weight_decay) : 0.0f);
  }
}

}  // namespace ft

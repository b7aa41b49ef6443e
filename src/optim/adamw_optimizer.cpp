#include "optim/adamw_optimizer.h"

#include <algorithm>

#include "kernels/ops.h"

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
}

void AdamW::step(float* weights, Addressing wa, const float* grads, Addressing ga, double lr, float grad_scale,
                 uint16_t* weights_bf16) {
  ++step_;
  for (const Segment& s : segments_) {
    const int64_t wo = wa == Addressing::kArena ? s.arena : s.compact;
    float* w = weights + wo;
    const float* g = grads + (ga == Addressing::kArena ? s.arena : s.compact);
    ops::adamw_step(ctx_, w, m_.data<float>() + s.compact, v_.data<float>() + s.compact,
                    weights_bf16 ? weights_bf16 + wo : nullptr, g, s.count, static_cast<float>(lr),
                    static_cast<float>(cfg_.beta1), static_cast<float>(cfg_.beta2), static_cast<float>(cfg_.eps),
                    s.decay ? static_cast<float>(cfg_.weight_decay) : 0.0f, step_, grad_scale);
  }
}

}  // namespace ft

#include "optim/adamw.h"

#include <algorithm>

#include "kernels/ops.h"

namespace ft {

AdamW::AdamW(const OptimConfig& cfg, const ParamLayout& layout, int64_t begin, int64_t end)
    : cfg_(cfg), begin_(begin), end_(end) {
  for (const ParamSpec& p : layout.specs()) {
    int64_t b = std::max(begin, p.offset), e = std::min(end, p.offset + p.numel());
    if (b < e) segments_.push_back({b, e, p.decay});
  }
  m_ = Tensor::zeros({end - begin}, DType::kF32, MemCategory::kOptimizerState);
  v_ = Tensor::zeros({end - begin}, DType::kF32, MemCategory::kOptimizerState);
}

void AdamW::step(float* weights, const float* grads, double lr, float grad_scale) {
  ++step_;
  for (const Segment& s : segments_) {
    int64_t off = s.begin - begin_, n = s.end - s.begin;
    ops::adamw_step(weights + off, m_.data<float>() + off, v_.data<float>() + off, nullptr, grads + off, n,
                    static_cast<float>(lr), static_cast<float>(cfg_.beta1), static_cast<float>(cfg_.beta2),
                    static_cast<float>(cfg_.eps), s.decay ? static_cast<float>(cfg_.weight_decay) : 0.0f, step_,
                    grad_scale);
  }
}

}  // namespace ft

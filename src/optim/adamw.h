// AdamW over a range of the flat parameter arena, with fp32 moments. Data parallelism without
// ZeRO gives it the whole arena; ZeRO-1/2/3 give each rank its shard (offset, count). Weight
// decay applies per parameter (ParamSpec::decay), so a shard boundary may cut a parameter.
//
//   AdamW opt(cfg.optim, layout, /*begin=*/0, /*end=*/layout.total());
//   opt.step(weights, grads, lr, clip_scale);   // weights/grads point at element `begin`
#pragma once

#include <cstdint>

#include "model/param_layout.h"
#include "tensor/tensor.h"
#include "train/train_config.h"

namespace ft {

class AdamW {
 public:
  AdamW(const OptimConfig& cfg, const ParamLayout& layout, int64_t begin, int64_t end);

  // One update of elements [begin, end). weights and grads point at element `begin`;
  // grad_scale multiplies every gradient (clipping, loss-scale removal).
  void step(float* weights, const float* grads, double lr, float grad_scale);

  int64_t steps_taken() const { return step_; }
  void set_steps_taken(int64_t s) { step_ = s; }
  int64_t begin() const { return begin_; }
  int64_t end() const { return end_; }
  Tensor& exp_avg() { return m_; }
  Tensor& exp_avg_sq() { return v_; }

 private:
  struct Segment {
    int64_t begin, end;  // arena elements
    bool decay;
  };
  OptimConfig cfg_;
  int64_t begin_, end_;
  std::vector<Segment> segments_;  // the parameters (or parts) inside [begin, end)
  Tensor m_, v_;
  int64_t step_ = 0;
};

}  // namespace ft

// AdamW over the pieces of the flat parameter arena that this rank updates, with fp32 moments.
// Without ZeRO the one piece is the whole arena; with ZeRO each rank owns a piece of every unit
// (parallel/data_parallel/shard_plan.h). Moments are stored compactly, piece after piece. Weight
// decay applies per parameter (ParamSpec::decay); arena padding between units is skipped.
//
//   AdamW opt(ctx, cfg.optim, layout, {{0, layout.total()}});
//   opt.step(weights, Addressing::kArena, grads, Addressing::kArena, lr, clip_scale);
//   opt.step(weights, ..., clip_scale, weights_bf16);   // also writes the updated weights in bf16
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "model/param_layout.h"
#include "optim/optim_config.h"
#include "tensor/exec_context.h"
#include "tensor/tensor.h"

namespace ft {

// How a buffer passed to step() is indexed: by arena offset (the full arena), or compactly
// (this rank's pieces back to back).
enum class Addressing : uint8_t { kArena, kCompact };

class AdamW {
 public:
  using Ranges = std::vector<std::pair<int64_t, int64_t>>;  // arena [begin, end), in order
  // Its update runs on ctx.
  AdamW(const ExecContext& ctx, const OptimConfig& cfg, const ParamLayout& layout, const Ranges& pieces);

  // weights_bf16 (addressed like weights), when not null, receives the updated pieces in bf16 in
  // the same pass.
  void step(float* weights, Addressing wa, const float* grads, Addressing ga, double lr, float grad_scale,
            uint16_t* weights_bf16 = nullptr);

  int64_t steps_taken() const { return step_; }
  void set_steps_taken(int64_t s) { step_ = s; }
  int64_t size() const { return m_.numel(); }
  Tensor& exp_avg() { return m_; }
  Tensor& exp_avg_sq() { return v_; }

 private:
  struct Segment {
    int64_t arena, compact, count;
    bool decay;
  };
  ExecContext ctx_;
  OptimConfig cfg_;
  std::vector<Segment> segments_;
  Tensor m_, v_;
  int64_t step_ = 0;
};

}  // namespace ft

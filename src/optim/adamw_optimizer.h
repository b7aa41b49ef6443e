// AdamW over the pieces of the flat parameter arena that this rank updates, with fp32 moments.
// Without ZeRO the one piece is the whole arena; with ZeRO each rank owns a piece of every unit
// (parallel/data_parallel/shard_plan.h). Moments are stored compactly, piece after piece. Weight
// decay applies per parameter (ParamSpec::decay); arena padding between units is skipped.
//
// The step's values (lr, the bias corrections, the gradient's factor) reach the device through
// one small buffer (kernels/adamw_scalars.h), written on the host into pinned memory and copied
// up as the update's first device work: the update's launches are the same every step, so a
// CUDA graph of queue_step() (train/step_graph.h) replays as that step's update.
//
//   AdamW opt(ctx, cfg.optim, layout, {{0, layout.total()}});
//   opt.step(weights, Addressing::kArena, grads, Addressing::kArena, lr, clip_scale);
//   opt.step(weights, ..., clip_scale, weights_bf16);   // also writes the updated weights in bf16
//   opt.begin_step(lr, clip_scale);                     // the same in two halves: host,
//   graph.run(0, [&] { opt.queue_step(weights, ..., weights_bf16); });   // device work only
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/adamw_scalars.h"
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

  AdamW(const AdamW&) = delete;
  AdamW& operator=(const AdamW&) = delete;
  ~AdamW();

  // weights_bf16 (addressed like weights), when not null, receives the updated pieces in bf16 in
  // the same pass. = begin_step + queue_step.
  void step(float* weights, Addressing wa, const float* grads, Addressing ga, double lr, float grad_scale,
            uint16_t* weights_bf16 = nullptr) {
    begin_step(lr, grad_scale);
    queue_step(weights, wa, grads, ga, weights_bf16);
  }
  // Host half: counts the step and writes its scalars into the pinned buffer. The previous
  // update's copy of them must have run (it has once the step's scalars were read back: the
  // trainer's one read-back per step waits for the stream).
  void begin_step(double lr, float grad_scale);
  // Device half: the scalars' copy up, then one adamw_step per segment reading them — the same
  // calls with the same arguments every step (capturable when the pointers stay put).
  void queue_step(float* weights, Addressing wa, const float* grads, Addressing ga, uint16_t* weights_bf16 = nullptr);

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
  AdamwStepScalars* host_scalars_ = nullptr;  // pinned: written by begin_step
  Tensor scalars_;                            // the device's copy adamw_step reads (4 floats)
};

}  // namespace ft

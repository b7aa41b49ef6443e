// StepGraph: the steady-state step's forward and backward (the executor's queue_staged and the
// gradient norm's sums) as one CUDA graph, replayed each step instead of ~40 launches per layer —
// for small models, whose steps are launch-bound (train.cuda_graphs, train_config.h).
//
//   StepGraph graph(ctx, decide_cuda_graphs(cfg.train.cuda_graphs, ctx, cfg.parallel, flops, launches, peak));
//   executor.stage(batch);                                    // host work, outside the graph
//   graph.run(grad_scale, [&] { executor.queue_staged(grad_scale); engine.queue_gradient_norm(); });
//
// run() runs `queue` eagerly the first time it sees a key (the warm-up: lazily made buffers are
// made, host state settles), captures it the second time and replays it from then on while the
// key stays the same. The key is every by-value argument the captured work depends on (the loss's
// gradient scale); a new key runs eagerly once and is captured again. The graph holds pointers:
// the buffers it reads and writes (the pinned batch, activations, weights, gradients, the step's
// scalars) must stay where they are, which they do for the trainer's life.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "parallel/parallel_config.h"
#include "tensor/device_graph.h"
#include "tensor/exec_context.h"
#include "train/train_config.h"

namespace ft {

// Whether the step is captured and why (logged once).
struct GraphChoice {
  bool capture = false;
  bool required = false;  // train.cuda_graphs = "on": a failed capture ends the run
  std::string reason;
};

// The "auto" rule: capture when the average kernel of the step would be shorter than a launch
// (kLaunchSeconds), i.e. the step is launch-bound — the step's FLOPs over its launches at the
// device's peak (peak_flops; 0: unknown, an H100-class 1e15 FLOP/s assumed).
inline constexpr double kLaunchSeconds = 5e-6;
bool graphs_pay_off(double step_flops, int64_t launches, double peak_flops);
// The kernels a step launches, about: per micro-batch ~40 per layer (forward and backward) and
// ~20 for the embedding, the head and the loss.
int64_t step_launches(int64_t n_layers, int64_t micro_batches);

// train.cuda_graphs decided for this rank: "off" never; "on" and "auto" need a device that
// captures (tensor/device_graph.h), parallel.dp = tp = pp = 1 and a capturable executor; "auto"
// also a launch-bound step (graphs_pay_off). ft::Error for "on" where it cannot capture.
GraphChoice decide_cuda_graphs(CudaGraphs setting, const ExecContext& ctx, const ParallelConfig& par,
                               bool executor_capturable, double step_flops, int64_t launches, double peak_flops);

class StepGraph {
 public:
  StepGraph(const ExecContext& ctx, GraphChoice choice) : ctx_(ctx), choice_(std::move(choice)) {}

  bool enabled() const { return choice_.capture; }
  // Runs `queue` (device work only): eagerly, captured and replayed, or replayed (see above).
  // A capture that breaks: ft::Error naming the call when required, else said once and the step
  // (and every later one) runs eagerly.
  void run(float key, const std::function<void()>& queue);

  int64_t captures() const { return captures_; }
  int64_t replays() const { return replays_; }

 private:
  ExecContext ctx_;
  GraphChoice choice_;
  DeviceGraph graph_;
  bool warm_ = false;  // the last run was eager with key_
  float key_ = 0;
  int64_t captures_ = 0, replays_ = 0;
};

}  // namespace ft

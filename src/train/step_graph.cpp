#include "train/step_graph.h"

#include <algorithm>
#include <bit>
#include <cstdint>

#include "util/error.h"
#include "util/log.h"

namespace ft {

bool graphs_pay_off(double step_flops, int64_t launches, double peak_flops) {
  const double peak = peak_flops > 0 ? peak_flops : 1e15;
  return launches > 0 && step_flops / static_cast<double>(launches) / peak < kLaunchSeconds;
}

int64_t step_launches(int64_t n_layers, int64_t micro_batches) {
  return micro_batches * (40 * n_layers + 20);
}

GraphChoice decide_cuda_graphs(CudaGraphs setting, const ExecContext& ctx, const ParallelConfig& par,
                               bool executor_capturable, double step_flops, int64_t launches, double peak_flops) {
  if (setting == CudaGraphs::kOff) return {false, false, "train.cuda_graphs = \"off\""};
  const bool on = setting == CudaGraphs::kOn;
  std::string cannot;
  if (!graphs_supported(ctx))
    cannot = fmt::format("the {} device records no graphs", device_name(ctx.device));
  else if (par.dp > 1 || par.tp > 1 || par.pp > 1 || par.cp > 1)
    cannot = "the step has collectives (parallel.dp, tp, pp or cp > 1)";
  else if (!executor_capturable)
    cannot = "the step's executor cannot be captured";
  if (!cannot.empty()) {
    if (on) throw Error("train.cuda_graphs = \"on\", but " + cannot, "use train.cuda_graphs = \"auto\" or \"off\"");
    return {false, false, "train.cuda_graphs = \"auto\": not captured: " + cannot};
  }
  if (on) return {true, true, "train.cuda_graphs = \"on\""};
  const double per_launch = step_flops / static_cast<double>(std::max<int64_t>(launches, 1));
  if (!graphs_pay_off(step_flops, launches, peak_flops))
    return {false, false,
            fmt::format("train.cuda_graphs = \"auto\": not captured: ~{:.3g} FLOP per launch over {} launches is not "
                        "launch-bound",
                        per_launch, launches)};
  return {true, false,
          fmt::format("train.cuda_graphs = \"auto\": captured, ~{:.3g} FLOP per launch over {} launches is "
                      "launch-bound",
                      per_launch, launches)};
}

void StepGraph::run(float key, const std::function<void()>& queue) {
  if (!choice_.capture) return queue();
  const bool same = warm_ && std::bit_cast<uint32_t>(key) == std::bit_cast<uint32_t>(key_);
  if (!graph_.empty() && same) {
    graph_.replay(ctx_);
    ++replays_;
    return;
  }
  if (!same) {  // a new key: eagerly once (the warm-up), captured at the next run
    graph_ = DeviceGraph();
    queue();
    warm_ = true, key_ = key;
    return;
  }
  try {
    graph_ = DeviceGraph::capture(ctx_, queue);
  } catch (const Error& e) {
    if (choice_.required)
      throw Error(fmt::format("train.cuda_graphs = \"on\": {}: {}", what_, e.what()),
                  e.hint().empty() ? "set train.cuda_graphs = \"off\"" : e.hint());
    log_warn("train.cuda_graphs = \"auto\": {} could not be captured ({}); it runs without graphs", what_, e.what());
    choice_.capture = false;
    return queue();  // nothing of the capture ran: the step runs now
  }
  ++captures_;
  graph_.replay(ctx_);  // the capture ran nothing: this step's work
  ++replays_;
}

}  // namespace ft

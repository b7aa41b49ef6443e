#include "plan/research/links.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "config/plan_job.h"
#include "model/param_layout.h"
#include "parallel/wires.h"
#include "plan/time.h"
#include "util/error.h"

namespace ft::plan {
namespace {

// Collectives a step issues besides the gradients, each a round of 2(p-1) small messages: the
// gradient norm, the loss and data hash over dp, the guards' verdict, the per-rank metrics.
constexpr int kControlCollectives = 4;

// PowerSGD's split of a unit (parallel/data_parallel/powersgd_compression.cpp): matrices whose rank-r factors are
// much smaller than the matrix travel as P (n × r) and Q (m × r); the rest in one packed vector.
struct PowerSgdUnit {
  double packed = 0, p = 0, q = 0;  // fp32 elements
};

PowerSgdUnit powersgd_unit(const ParamLayout& layout, int u, int64_t r) {
  PowerSgdUnit out;
  for (const ParamSpec& s : layout.specs()) {
    if (s.unit != u) continue;
    const bool matrix = s.shape.size() == 2;
    const int64_t n = matrix ? s.shape[0] : 0, m = matrix ? s.shape[1] : 0;
    if (matrix && (n + m) * r * 2 < n * m) {
      out.p += static_cast<double>(n * r);
      out.q += static_cast<double>(m * r);
    } else {
      out.packed += static_cast<double>(s.numel());
    }
  }
  return out;
}

const char* compression_name(GradCompression c) {
  return c == GradCompression::kBF16       ? "bf16"
         : c == GradCompression::kFP16     ? "fp16"
         : c == GradCompression::kPowerSGD ? "powersgd"
                                           : "none";
}

}  // namespace

double ring_all_reduce_s(double bytes, int64_t p, const LinkSpec& link) {
  if (p <= 1) return 0;
  const double steps = 2.0 * static_cast<double>(p - 1);
  return steps * (link.latency + bytes / static_cast<double>(p) / (link.bandwidth * link.payload));
}

LinkStep predict_step_over_links(const Config& cfg, const GpuSpec& device, const LinkSpec& link, double compute_s) {
  const ParallelConfig& par = cfg.parallel;
  if (par.tp != 1 || par.pp != 1 || par.zero != 0) {
    throw Error(fmt::format("the link model covers data parallelism with ZeRO 0 only (got dp {} tp {} pp {} zero {})",
                            par.dp, par.tp, par.pp, par.zero),
                "set parallel.tp = 1, parallel.pp = 1, parallel.zero = 0");
  }
  if (!(link.bandwidth > 0) || !(link.latency >= 0))
    throw Error(fmt::format("link bandwidth {} B/s and latency {} s: bandwidth must be positive, latency >= 0",
                            link.bandwidth, link.latency));
  if (!(compute_s > 0))
    throw Error(fmt::format("compute time {} s must be positive", compute_s),
                "measure it: the median compute_s of metrics.jsonl from the same configuration on one host");
  const ModelConfig& m = cfg.model;
  const int64_t dp = par.dp;
  LinkStep out;
  out.compression = compression_name(par.grad_compression);
  out.compute = compute_s;

  // The compute split by the planner's own model of this step on this device: the optimizer's
  // share, then forward : backward as their FLOPs (backward twice the forward's GEMMs).
  const StepTime st = estimate_step_time(job_for_run(cfg, device), layout_for_run(cfg));
  const double modelled = st.gemm + st.attention + st.memory + st.optimizer;
  out.optimizer = modelled > 0 ? compute_s * st.optimizer / modelled : 0;
  const double fb = compute_s - out.optimizer;
  out.forward = fb / 3.0;
  out.backward = fb - out.forward;

  // Backward runs the units from the head down to the embedding; a unit's share of the backward
  // time is its share of the backward FLOPs (the embedding's is a scatter: none).
  const ParamLayout layout = ParamLayout::llama(m, dp);
  const int units = layout.num_units();
  const double T = static_cast<double>(cfg.train.seq_len), d = static_cast<double>(m.dim);
  std::vector<double> bwd_flops(static_cast<size_t>(units), 0.0);
  double total_flops = 0;
  for (int u = 0; u < units; ++u) {
    const int g = layout.global_unit(u);
    double f = 0;
    if (g == static_cast<int>(m.n_layers) + 1)
      f = 4.0 * static_cast<double>(m.vocab_size) * d;  // dX and dW of the LM head, per token
    else if (g >= 1)
      f = 4.0 * static_cast<double>(m.params_per_layer() - 2 * m.dim) + 4.0 * T * d;  // GEMMs, causal attention
    bwd_flops[static_cast<size_t>(u)] = f;
    total_flops += f;
  }
  std::vector<double> done_at(static_cast<size_t>(units), 0.0);  // seconds into the step
  double t = out.forward;
  for (int u = units - 1; u >= 0; --u) {
    t += out.backward * bwd_flops[static_cast<size_t>(u)] / total_flops;
    done_at[static_cast<size_t>(u)] = t;
  }
  const double backward_end = out.forward + out.backward;

  // Buckets exactly as the ZeRO-0 engine forms them: from the last unit down, a new one when the
  // current has reached parallel.bucket_mb.
  const double target = par.bucket_mb * 1024 * 1024 / 4;
  for (int u = units - 1; u >= 0; --u) {
    if (out.buckets.empty() || out.buckets.back().elements >= target) out.buckets.push_back({});
    LinkStep::Bucket& b = out.buckets.back();
    b.elements += static_cast<double>(layout.unit_size(u));
    b.ready = done_at[static_cast<size_t>(u)];
  }
  out.overlap = out.buckets.size() > 1;

  if (par.grad_compression == GradCompression::kPowerSGD) {
    // Synchronous on the training thread at each bucket: per unit the packed vector, then P, then
    // Q (one communication thread runs them in that order). Nothing hides.
    for (int u = 0; u < units; ++u) {
      PowerSgdUnit pu = powersgd_unit(layout, u, par.powersgd_rank);
      out.comm += ring_all_reduce_s(4.0 * pu.packed, dp, link);  // issued even when empty
      if (pu.p > 0) out.comm += ring_all_reduce_s(4.0 * pu.p, dp, link) + ring_all_reduce_s(4.0 * pu.q, dp, link);
    }
    out.exposed = out.comm;
    for (auto& b : out.buckets) b.start = b.end = b.ready;
  } else {
    const double wire = static_cast<double>(wire_bytes(trainer_wires(par, false).grads));
    double free_at = 0;
    for (auto& b : out.buckets) {
      b.start = std::max(b.ready, free_at);
      b.end = b.start + ring_all_reduce_s(wire * b.elements, dp, link);
      free_at = b.end;
      out.comm += b.end - b.start;
    }
    out.exposed = std::max(0.0, free_at - backward_end);
  }
  out.control = kControlCollectives * ring_all_reduce_s(16.0, dp, link);
  out.step = compute_s + out.exposed + out.control;
  return out;
}

nlohmann::json to_json(const LinkStep& s, const LinkSpec& link) {
  nlohmann::json buckets = nlohmann::json::array();
  for (const auto& b : s.buckets)
    buckets.push_back({{"elements", b.elements}, {"ready_s", b.ready}, {"start_s", b.start}, {"end_s", b.end}});
  return {{"link", {{"bandwidth_bytes_per_s", link.bandwidth}, {"latency_s", link.latency}, {"payload", link.payload}}},
          {"compression", s.compression},
          {"overlap", s.overlap},
          {"compute_s", s.compute},
          {"forward_s", s.forward},
          {"backward_s", s.backward},
          {"optimizer_s", s.optimizer},
          {"comm_s", s.comm},
          {"exposed_s", s.exposed},
          {"control_s", s.control},
          {"step_s", s.step},
          {"buckets", buckets}};
}

std::string format_link_step(const LinkStep& s, const LinkSpec& link, int64_t dp) {
  std::string out = fmt::format(
      "data parallelism over links: dp {}, {:.3g} Gbit/s, {:.0f} us latency; compression {}, {} bucket(s){}\n", dp,
      link.bandwidth * 8 / 1e9, link.latency * 1e6, s.compression, s.buckets.size(),
      s.overlap ? " (overlapping backward)" : " (after backward)");
  out += fmt::format("  compute  {:.3f} s measured (forward {:.3f}, backward {:.3f}, optimizer {:.3f})\n", s.compute,
                     s.forward, s.backward, s.optimizer);
  out += fmt::format("  gradients {:.3f} s of communication, {:.3f} s of it exposed; control {:.4f} s\n", s.comm,
                     s.exposed, s.control);
  out += fmt::format("  step     {:.3f} s predicted\n", s.step);
  return out;
}

}  // namespace ft::plan

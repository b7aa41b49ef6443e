#include "parallel/pipeline_parallel/schedule.h"

#include <algorithm>

#include "util/error.h"

namespace ft {
namespace {

struct Compute {
  bool forward;
  int mb, chunk;
};

// Forward order of (micro-batch, chunk) on stage s: micro-batch order for one chunk per stage;
// with v chunks, groups of p micro-batches visit the chunks in turn (backward: chunks reversed).
std::vector<Compute> pass_order(const Schedule& s, int stage, bool forward) {
  const int p = s.stages, m = s.micro_batches, v = s.virtual_stages;
  std::vector<Compute> out;
  for (int g0 = 0; g0 < m; g0 += p) {
    const int group = v == 1 ? m : std::min(p, m - g0);
    for (int c = 0; c < v; ++c) {
      int local = forward ? c : v - 1 - c;
      for (int i = 0; i < group; ++i) out.push_back({forward, g0 + i, stage + local * p});
    }
    if (v == 1) break;
  }
  return out;
}

// Warm-up forwards before the first backward on stage s (see schedule.h).
int warmup(const Schedule& s, int stage) {
  const int p = s.stages, m = s.micro_batches, v = s.virtual_stages;
  switch (s.kind) {
    case PipelineSchedule::kGPipe:
      return m;
    case PipelineSchedule::k1F1B:
      return std::min(m, p - 1 - stage);
    case PipelineSchedule::kInterleaved:
      return std::min(m * v, 2 * (p - 1 - stage) + (v - 1) * p);
  }
  return m;
}

// Computations of stage s in execution order.
std::vector<Compute> compute_order(const Schedule& s, int stage) {
  std::vector<Compute> fwd = pass_order(s, stage, true);
  if (!s.training) return fwd;
  std::vector<Compute> bwd = pass_order(s, stage, false);
  const size_t w = static_cast<size_t>(warmup(s, stage));
  std::vector<Compute> out(fwd.begin(), fwd.begin() + static_cast<std::ptrdiff_t>(w));
  size_t f = w, b = 0;
  while (f < fwd.size()) {  // steady state: one forward, one backward
    out.push_back(fwd[f++]);
    out.push_back(bwd[b++]);
  }
  while (b < bwd.size()) out.push_back(bwd[b++]);
  return out;
}

void check_arguments(PipelineSchedule kind, int p, int m, int v) {
  if (p <= 0 || m <= 0 || v <= 0)
    throw Error(fmt::format("pipeline schedule: stages = {}, micro-batches = {}, virtual stages = {} must be positive",
                            p, m, v));
  if (v > 1 && kind != PipelineSchedule::kInterleaved)
    throw Error(
        fmt::format("{} virtual stages need the interleaved schedule (not {})", v, pipeline_schedule_name(kind)),
        "use --schedule interleaved, or one virtual stage");
  if (kind == PipelineSchedule::kInterleaved && v < 2)
    throw Error("the interleaved schedule needs at least 2 virtual stages (model chunks per stage)",
                "set parallel.virtual_stages (--virtual-stages) to 2 or more, or use 1f1b");
  if (kind == PipelineSchedule::kInterleaved && m % p != 0)
    throw Error(fmt::format("the interleaved schedule runs micro-batches in groups of one per stage: {} micro-batches "
                            "are not a multiple of {} stages",
                            m, p),
                fmt::format("use a multiple of {} micro-batches (parallel.micro_batches)", p));
}

Schedule build(PipelineSchedule kind, int p, int m, int v, bool training) {
  check_arguments(kind, p, m, v);
  Schedule s;
  s.kind = kind;
  s.stages = p;
  s.micro_batches = m;
  s.virtual_stages = v;
  s.training = training;
  s.actions.resize(static_cast<size_t>(p));
  const int last = s.chunks() - 1;
  for (int st = 0; st < p; ++st) {
    auto& list = s.actions[static_cast<size_t>(st)];
    for (const Compute& c : compute_order(s, st)) {
      if (c.forward) {
        if (c.chunk > 0) list.push_back({PipelineActionKind::kRecvActivation, c.mb, c.chunk});
        list.push_back({PipelineActionKind::kForward, c.mb, c.chunk});
        if (c.chunk < last) list.push_back({PipelineActionKind::kSendActivation, c.mb, c.chunk});
      } else {
        if (c.chunk < last) list.push_back({PipelineActionKind::kRecvGrad, c.mb, c.chunk});
        list.push_back({PipelineActionKind::kBackward, c.mb, c.chunk});
        if (c.chunk > 0) list.push_back({PipelineActionKind::kSendGrad, c.mb, c.chunk});
      }
    }
    int bound = !training ? 1 : kind == PipelineSchedule::kGPipe ? m : std::min(m * v, warmup(s, st) + 1);
    s.in_flight_bound.push_back(bound);
  }
  return s;
}

}  // namespace

const char* action_name(PipelineActionKind op) {
  switch (op) {
    case PipelineActionKind::kRecvActivation:
      return "recv_act";
    case PipelineActionKind::kForward:
      return "forward";
    case PipelineActionKind::kSendActivation:
      return "send_act";
    case PipelineActionKind::kRecvGrad:
      return "recv_grad";
    case PipelineActionKind::kBackward:
      return "backward";
    case PipelineActionKind::kSendGrad:
      return "send_grad";
  }
  return "?";
}

std::string Schedule::describe() const {
  std::string s = fmt::format("{}{}, {} stage(s), {} micro-batch(es)", pipeline_schedule_name(kind),
                              training ? "" : " (forward only)", stages, micro_batches);
  if (virtual_stages > 1) s += fmt::format(", {} virtual stages", virtual_stages);
  return s;
}

Schedule make_schedule(PipelineSchedule kind, int stages, int micro_batches, int virtual_stages) {
  return build(kind, stages, micro_batches, virtual_stages, true);
}

Schedule make_forward_schedule(PipelineSchedule kind, int stages, int micro_batches, int virtual_stages) {
  return build(kind, stages, micro_batches, virtual_stages, false);
}

int activation_tag(int sender_chunk) {
  return 2 * sender_chunk;
}
int grad_tag(int sender_chunk) {
  return 2 * sender_chunk + 1;
}

double theoretical_bubble(PipelineSchedule kind, int p, int m, int v) {
  double work = kind == PipelineSchedule::kInterleaved ? static_cast<double>(v) * m : m;
  return (p - 1) / (work + p - 1);
}

}  // namespace ft

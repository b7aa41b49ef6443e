#include "plan/memory.h"

#include <algorithm>

namespace ft::plan {

double MemoryBreakdown::total() const {
  return parameters + gradients + optimizer_state + activations + workspace + communication + runtime +
         fragmentation;
}

std::vector<std::pair<std::string, double>> MemoryBreakdown::items() const {
  std::vector<std::pair<std::string, double>> all = {
      {"parameters", parameters},   {"gradients", gradients}, {"optimizer_state", optimizer_state},
      {"activations", activations}, {"workspace", workspace}, {"communication", communication},
      {"runtime", runtime},         {"fragmentation", fragmentation}};
  std::vector<std::pair<std::string, double>> out;
  for (auto& kv : all)
    if (kv.second > 0) out.push_back(kv);
  return out;
}

StateBytes state_bytes_per_param(Precision p) {
  if (p == Precision::kFp32) return {4, 4, 8};
  return {2, 2, 12};
}

double micro_batches_in_flight(const Job& job, const Layout& l) {
  if (l.pp == 1) return 1;
  const double m = static_cast<double>(micro_batches_per_step(job, l));
  const double p = static_cast<double>(l.pp);
  const double interleave = 1.0 + (p - 1) / (p * static_cast<double>(l.vp));
  return std::min(p, m) * (l.vp > 1 ? interleave : 1.0);
}

namespace {

MemoryBreakdown cpu_memory(const Job& job, const Layout& l) {
  StepShape s;
  s.micro_batch = l.micro_batch;
  s.seq_len = job.seq_len / l.cp;
  s.tp = l.tp;
  s.pp = l.pp;
  s.dp = l.dp * l.cp;
  s.zero = l.zero;
  s.recompute = l.recompute != ActRecompute::kNone;
  s.loss_chunk_tokens = job.loss_chunk_tokens;
  // The peak rank: the only stage, or the larger of the first and the last stage.
  TrainerMemory best;
  for (int stage = 0; stage < (l.pp > 1 ? 2 : 1); ++stage) {
    s.first_stage = l.pp == 1 || stage == 0;
    s.last_stage = l.pp == 1 || stage == 1;
    TrainerMemory t = cpu_trainer_memory(job.model, s);
    if (t.total() > best.total()) best = t;
  }
  MemoryBreakdown out;
  out.parameters = static_cast<double>(best.parameters);
  out.gradients = static_cast<double>(best.gradients);
  out.optimizer_state = static_cast<double>(best.optimizer_state);
  out.activations = static_cast<double>(best.activations);
  out.workspace = static_cast<double>(best.workspace);
  out.capacity = job.gpu.memory_bytes;
  return out;
}

MemoryBreakdown gpu_stage_memory(const Job& job, const Layout& l, bool first, bool last) {
  const ModelConfig& m = job.model;
  const StateBytes sb = state_bytes_per_param(l.precision);
  const double act_scale = l.precision == Precision::kFp32 ? 2.0 : 1.0;  // 4-byte activations
  const double params = static_cast<double>(rank_params(m, l.tp, l.pp, first, last));
  const double shards = static_cast<double>(l.dp * l.cp);
  MemoryBreakdown out;
  out.parameters = params * sb.weights / (l.zero >= 3 ? shards : 1.0);
  out.gradients = params * sb.gradients / (l.zero >= 2 ? shards : 1.0);
  out.optimizer_state = params * sb.optimizer / (l.zero >= 1 ? shards : 1.0);

  const double tokens = static_cast<double>(l.micro_batch * job.seq_len / l.cp);
  const bool sp = l.sequence_parallel && l.tp > 1;
  const double layers = static_cast<double>(layers_per_stage(m, l.pp));
  const double in_flight = first ? micro_batches_in_flight(job, l) : 1.0;
  const double per_layer = gpu_layer_activation_bytes(m, tokens, job.seq_len, l.tp, sp, l.recompute,
                                                      l.flash_attention);
  double act = per_layer * layers * in_flight;
  if (l.recompute == ActRecompute::kFull)  // one block's full set while it is recomputed
    act += gpu_layer_activation_bytes(m, tokens, job.seq_len, l.tp, sp, ActRecompute::kNone, l.flash_attention);
  out.activations = act * act_scale;
  if (last || l.pp == 1)  // 16-bit logits plus the fp32 softmax/gradient of the loss
    out.workspace = tokens * static_cast<double>(m.vocab_size) / l.tp * 6.0;

  const double layer_params = static_cast<double>(m.params_per_layer()) / l.tp;
  double comm = 0;
  if (l.zero >= 3 && shards > 1) comm += 2 * layer_params * (sb.weights + sb.gradients);  // gathered + prefetched
  else if (shards > 1) comm += 2 * 25e6 * 4;                                              // gradient buckets
  if (l.pp > 1) comm += 2 * tokens * static_cast<double>(m.dim) / (sp ? l.tp : 1) * 2;  // p2p send/recv
  out.communication = comm;
  out.runtime = job.gpu.runtime_reserved;
  out.fragmentation = 0.10 * (out.total() - out.runtime);
  out.capacity = job.gpu.memory_bytes;
  return out;
}

}  // namespace

MemoryBreakdown estimate_memory(const Job& job, const Layout& l) {
  if (job.gpu.is_cpu) return cpu_memory(job, l);
  if (l.pp == 1) return gpu_stage_memory(job, l, true, true);
  MemoryBreakdown first = gpu_stage_memory(job, l, true, false);
  MemoryBreakdown last = gpu_stage_memory(job, l, false, true);
  return first.total() >= last.total() ? first : last;
}

}  // namespace ft::plan

#include "plan/memory_estimate.h"

#include <algorithm>

#include "model/activation_sizes.h"
#include "model/param_layout.h"
#include "plan/context_parallel.h"

namespace ft::plan {

double MemoryBreakdown::total() const {
  return parameters + gradients + optimizer_state + activations + workspace + communication + runtime + fragmentation;
}

std::vector<std::pair<std::string, double>> MemoryBreakdown::items() const {
  std::vector<std::pair<std::string, double>> all = {
      {"parameters", parameters},   {"gradients", gradients},        {"optimizer_state", optimizer_state},
      {"activations", activations}, {"workspace", workspace},        {"communication", communication},
      {"runtime", runtime},         {"fragmentation", fragmentation}};
  std::vector<std::pair<std::string, double>> out;
  for (auto& kv : all)
    if (kv.second > 0) out.push_back(kv);
  return out;
}

StateBytes state_bytes_per_param(Precision p) {
  if (p == Precision::kF32) return {4, 4, 8};
  return {2, 2, 12};
}

double micro_batches_in_flight(const Job& job, const Layout& l) {
  return micro_batches_in_flight(job, l, 0);
}

double micro_batches_in_flight(const Job& job, const Layout& l, int64_t stage) {
  if (l.pp == 1) return 1;
  const double m = static_cast<double>(micro_batches_per_step(job, l));
  const double p = static_cast<double>(l.pp), v = static_cast<double>(l.vp);
  const double s = static_cast<double>(std::clamp<int64_t>(stage, 0, l.pp - 1));
  // 1F1B: stage s runs pp − s − 1 warm-up forwards, then holds one more before its first
  // backward. Interleaved (Megatron-LM's forward_backward_pipelining_with_interleaving): stage s
  // runs 2(pp − s − 1) + (vp − 1)·pp warm-up chunk forwards, each chunk L/(pp·vp) layers of one
  // micro-batch; so it holds that + 1 chunks, i.e. (that + 1)/vp micro-batches of its L/pp layers
  // (stage 0: pp + (pp − 1)/vp, Korthikanti's factor) — and never more than the step's m
  // micro-batches (the schedule caps the warm-up at all m·vp chunks: all forwards, then all
  // backwards).
  const double held = l.vp > 1 ? (2.0 * (p - s - 1.0) + (v - 1.0) * p + 1.0) / v : p - s;
  return std::min(held, m);
}

int64_t stage_layers(const ModelConfig& m, int64_t pp, int64_t stage) {
  const int64_t most = layers_per_stage(m, pp);
  if (pp == 1) return m.n_layers;
  // A balanced split gives pp·⌈L/pp⌉ − L stages one block fewer; the last and the first stage,
  // which also hold the head and the embedding, are the first of them (Llama 3 405B: 126 layers
  // on 16 stages, one Transformer layer fewer on each; Dubey et al. 2024, Sec. 3.3.2). The
  // stages in between are counted at ⌈L/pp⌉ (an upper bound).
  const int64_t shortfall = pp * most - m.n_layers;
  if (most > 1 && stage == pp - 1 && shortfall >= 1) return most - 1;
  if (most > 1 && stage == 0 && shortfall >= 2) return most - 1;
  return most;
}

namespace {

// This machine: what the trainer allocates (docs/planner.md, "CPU"), per category.
//   parameters  the fp32 arena (ParamLayout, units padded to the dp size); ZeRO-3: this
//               rank's shard
//   gradients   the fp32 gradient arena; ZeRO-2/3: the shard plus the buffers of the units
//               being reduced (the unit in backward and one reduce-scatter in flight, each a
//               full unit and its piece)
//   optimizer   AdamW m and v over the arena (ZeRO >= 1: over the shard)
//   activations Activations + BackwardScratch (model/activation_sizes.h) of one micro-batch
//   workspace   the RoPE tables (max_seq_len x head_dim/2, cos and sin)
//   communication ZeRO-3: gathered units (the current one and the prefetched next)
// Tensor and pipeline parallelism split the model as on GPUs (rank_params).
MemoryBreakdown cpu_memory(const Job& job, const Layout& l, int64_t stage) {
  const bool first = stage == 0, last = stage == l.pp - 1;
  const ModelConfig& m = job.model;
  constexpr double kF32 = 4;
  const int64_t shards = l.dp * l.cp;
  const ParamLayout layout = ParamLayout::llama(m, shards);
  double arena = static_cast<double>(layout.total());
  double max_unit = 0;
  for (int u = 0; u < layout.num_units(); ++u) max_unit = std::max(max_unit, static_cast<double>(layout.unit_size(u)));
  if (l.tp > 1 || l.pp > 1) {
    arena = static_cast<double>(rank_params(m, l.tp, l.pp, first, last));
    max_unit /= static_cast<double>(l.tp);
  }
  const double shard = arena / static_cast<double>(shards);
  const bool sharded = shards > 1;
  MemoryBreakdown out;
  out.parameters = kF32 * (l.zero >= 3 && sharded ? shard : arena);
  const double in_flight = (2.0 + 2.0 / static_cast<double>(shards)) * max_unit;  // two units + pieces
  out.gradients = kF32 * (l.zero >= 2 && sharded ? shard + in_flight : arena);
  out.optimizer_state = 2 * kF32 * (l.zero >= 1 && sharded ? shard : arena);
  const int64_t B = l.micro_batch, T = job.seq_len / l.cp;
  const int64_t chunk = loss_chunk_tokens(m, job.loss_chunk_tokens, B * T);
  // Summed as doubles: absurd shapes saturate each term at INT64_MAX (util/saturating.h).
  double act = static_cast<double>(kept_activation_bytes(m, B, T, chunk, l.recompute)) +
               static_cast<double>(scratch_activation_bytes(m, B, T));
  if (l.pp > 1 || l.tp > 1) {
    // Per stage: its blocks only; tensor parallelism splits heads and ffn (C-sized replicated).
    ModelConfig part = m;
    part.n_layers = layers_per_stage(m, l.pp);
    part.n_heads = std::max<int64_t>(1, m.n_heads / l.tp);
    part.n_kv_heads = std::max<int64_t>(1, m.n_kv_heads / l.tp);
    part.ffn_dim = m.ffn_dim / l.tp;
    part.dim = m.dim;
    act = (static_cast<double>(kept_activation_bytes(part, B, T, chunk, l.recompute)) +
           static_cast<double>(scratch_activation_bytes(part, B, T))) *
          micro_batches_in_flight(job, l, stage);
  }
  out.activations = act;
  out.workspace = 2 * kF32 * static_cast<double>(m.max_seq_len) * static_cast<double>(m.head_dim() / 2);
  if (l.zero >= 3 && sharded) out.communication = 2 * kF32 * max_unit;
  out.communication += cp_cost(job, l, 0).buffers;  // the ring's or the all-to-all's host buffers
  // The ranks on this machine share its memory.
  out.capacity =
      job.gpu.memory_bytes / static_cast<double>(std::max<int64_t>(1, std::min(job.num_gpus(), job.gpus_per_node)));
  return out;
}

MemoryBreakdown gpu_stage_memory(const Job& job, const Layout& l, int64_t stage) {
  const bool first = stage == 0, last = stage == l.pp - 1;
  const ModelConfig& m = job.model;
  const StateBytes sb = state_bytes_per_param(l.precision);
  const double act_scale = l.precision == Precision::kF32 ? 2.0 : 1.0;  // 4-byte activations
  // The stage's own blocks: the first and last hold fewer when pp does not divide the layers.
  const double layers = static_cast<double>(stage_layers(m, l.pp, stage));
  const double block_params = static_cast<double>((m.params_per_layer() - 2 * m.dim) / l.tp + 2 * m.dim);
  double params = static_cast<double>(rank_params(m, l.tp, l.pp, first, last)) -
                  (static_cast<double>(layers_per_stage(m, l.pp)) - layers) * block_params;
  const double shards = static_cast<double>(l.dp * l.cp);
  MemoryBreakdown out;
  if (job.moe.enabled()) {
    // The routed experts the rank holds replace the active model's top_k; ZeRO shards them over
    // the dp·cp/ep ranks holding the same experts.
    params -= layers * moe_active_routed_params_per_layer(job.moe, m.dim, l.tp);
    const double held = layers * moe_held_params_per_layer(job.moe, m.dim, l.ep, l.tp);
    const double replicas = std::max(1.0, shards / static_cast<double>(l.ep));
    out.parameters = held * sb.weights / (l.zero >= 3 ? replicas : 1.0);
    out.gradients = held * sb.gradients / (l.zero >= 2 ? replicas : 1.0);
    out.optimizer_state = held * sb.optimizer / (l.zero >= 1 ? replicas : 1.0);
  }
  out.parameters += params * sb.weights / (l.zero >= 3 ? shards : 1.0);
  out.gradients += params * sb.gradients / (l.zero >= 2 ? shards : 1.0);
  out.optimizer_state += params * sb.optimizer / (l.zero >= 1 ? shards : 1.0);

  const double tokens = static_cast<double>(l.micro_batch * job.seq_len / l.cp);
  const bool sp = l.sequence_parallel && l.tp > 1;
  const double in_flight = micro_batches_in_flight(job, l, stage);
  double per_layer = gpu_layer_activation_bytes(m, tokens, job.seq_len, l.tp, sp, l.recompute, l.flash_attention);
  // One set of the recomputed buffers, refilled before each block's backward: full, a whole
  // block's; selective, the norm outputs and the SwiGLU product (what it does not keep).
  const double whole =
      gpu_layer_activation_bytes(m, tokens, job.seq_len, l.tp, sp, ActRecompute::kNone, l.flash_attention);
  // A layer-selective policy keeps only the inputs of the blocks it checkpoints whole.
  const double s = l.recompute == ActRecompute::kNone ? job.recompute_layer_share : 0.0;
  if (s > 0) {
    const double kept =
        gpu_layer_activation_bytes(m, tokens, job.seq_len, l.tp, sp, ActRecompute::kFull, l.flash_attention);
    per_layer = (1.0 - s) * per_layer + s * kept;
  }
  double act = per_layer * layers * in_flight;
  if (l.recompute == ActRecompute::kFull || s > 0) act += whole;
  if (l.recompute == ActRecompute::kSelective) act += whole - per_layer;
  out.activations = act * act_scale;
  if (last || l.pp == 1)  // 16-bit logits plus the fp32 softmax/gradient of the loss
    out.workspace = tokens * static_cast<double>(m.vocab_size) / l.tp * 6.0;

  const double layer_params = static_cast<double>(m.params_per_layer()) / l.tp;
  double comm = 0;
  if (l.zero >= 3 && shards > 1)
    comm += 2 * layer_params * (sb.weights + sb.gradients);  // gathered + prefetched
  else if (shards > 1)
    comm += 2 * 25e6 * 4;                                                               // gradient buckets
  if (l.pp > 1) comm += 2 * tokens * static_cast<double>(m.dim) / (sp ? l.tp : 1) * 2;  // p2p send/recv
  comm += cp_cost(job, l, 0).buffers;  // context parallelism's blocks in flight (plan/context_parallel.h)
  out.communication = comm;
  out.runtime = job.gpu.runtime_reserved;
  out.fragmentation = 0.10 * (out.total() - out.runtime);
  out.capacity = job.gpu.memory_bytes;
  return out;
}

}  // namespace

MemoryBreakdown estimate_stage_memory(const Job& job, const Layout& l, int64_t stage) {
  return job.gpu.is_cpu ? cpu_memory(job, l, stage) : gpu_stage_memory(job, l, stage);
}

MemoryBreakdown estimate_memory(const Job& job, const Layout& l) {
  // The first stage holds the most micro-batches' activations, the last the LM head's logits;
  // the stages in between hold less than the first.
  MemoryBreakdown first = estimate_stage_memory(job, l, 0);
  if (l.pp == 1) return first;
  MemoryBreakdown last = estimate_stage_memory(job, l, l.pp - 1);
  return first.total() >= last.total() ? first : last;
}

}  // namespace ft::plan

#include "plan/time.h"

#include <algorithm>
#include <cmath>

#include "plan/context_parallel.h"
#include "plan/memory_estimate.h"
#include "plan/traffic.h"

namespace ft::plan {

namespace {

// NCCL bus bandwidth of a collective over n ranks, k of which share a node.
double bus_bandwidth(const Job& job, int64_t n, int64_t k) {
  const GpuSpec& g = job.gpu;
  if (n <= k) return g.nvlink_bw * g.eff.collective;
  return std::min(g.nvlink_bw, static_cast<double>(k) * g.network_bw) * g.eff.collective;
}

// Bus bandwidth of a data-parallel group of n ranks spaced `stride` GPUs apart, k on a node: past
// one pod the ring crosses the spine, which gives each GPU network_bw / oversubscription.
double dp_bus_bandwidth(const Job& job, int64_t n, int64_t k, int64_t stride) {
  const GpuSpec& g = job.gpu;
  double bw = bus_bandwidth(job, n, k);
  if (g.pod_gpus > 0 && g.spine_oversubscription > 1 && n > k && sat_mul(n, stride) > g.pod_gpus)
    bw = std::min(bw, static_cast<double>(k) * g.network_bw / g.spine_oversubscription * g.eff.collective);
  return bw;
}

// Communication that does not hide behind `window` seconds of compute: what exceeds the window,
// plus the share of the overlapped part that overlap < 1 leaves exposed.
double exposed(double comm, double window, double overlap) {
  return std::max(0.0, comm - window) + (1.0 - overlap) * std::min(comm, window);
}

}  // namespace

double collective_latency(const GpuSpec& g, int64_t nodes) {
  if (nodes <= 1) return 0;
  const double ring = 2.0 * static_cast<double>(nodes - 1);
  const double tree = 2.0 * std::ceil(std::log2(static_cast<double>(nodes)));
  return g.collective_base_latency + std::min(ring, tree) * g.network_hop_latency;
}

double dp_collectives(const Job& job, const Layout& l, int64_t micro_batches, double params_local) {
  if (l.zero >= 3)
    return 3.0 * static_cast<double>(layers_per_stage(job.model, l.pp)) * static_cast<double>(micro_batches);
  const double buckets = std::ceil(params_local / 25e6);
  return buckets * (l.zero >= 1 ? 2.0 : 1.0);
}

double fp8_cast_bytes_per_element(Fp8Recipe r) {
  switch (r) {
    case Fp8Recipe::kDelayed:
      // Transformer Engine fuses the cast into the kernel that produces the input (norm,
      // activation, gradient): the fp8 value replaces a 16-bit write; the transposed copy for the
      // backward GEMM is the extra byte.
      return 1.0;
    case Fp8Recipe::kCurrent:
      // Fused the same way (Transformer Engine, torch.compile), but the scale needs the tensor's
      // amax before the cast: one more read of the 16-bit tensor.
      return 2.0 + 1.0;
    case Fp8Recipe::kMXFP8:
      return 1.0 + 2.0 / 32.0;  // fused like delayed; a scale byte per 32 in each orientation
    case Fp8Recipe::kNVFP4:
      return 2.0 + 2.0 * (0.5 + 1.0 / 16.0);  // per-tensor amax read; 4-bit values, a scale per 16
  }
  return 0;
}

double fp8_cast_elements_per_token(const ModelConfig& m, int64_t tp) {
  const double h = static_cast<double>(m.dim), t = static_cast<double>(tp);
  const double f = static_cast<double>(m.ffn_dim), qkv = static_cast<double>(m.qkv_dim());
  const double forward = 2.0 * h + h / t + f / t;         // QKV and MLP inputs, attention output, SwiGLU product
  const double backward = 2.0 * h + (qkv + 2.0 * f) / t;  // gradients of the O, down, QKV, gate/up outputs
  return forward + backward;
}

double hardware_flops_per_token(const Job& job, const Layout& l) {
  const ModelConfig& m = job.model;
  double f = m.train_flops_per_token(job.seq_len);
  const double attn_fwd = 4.0 * static_cast<double>(m.n_layers * m.dim) * static_cast<double>(job.seq_len);
  // Selective recompute (norms, SwiGLU) adds element-wise work only: no FLOPs counted.
  if (l.recompute == ActRecompute::kFull)
    f += 2.0 * static_cast<double>(m.matmul_params()) + attn_fwd;
  else
    f += 2.0 * static_cast<double>(m.n_layers * (m.params_per_layer() - 2 * m.dim)) *
             (job.recompute_matmul_share + job.recompute_layer_share) +
         attn_fwd * job.recompute_layer_share;
  return f;
}

StepTime estimate_step_time(const Job& job, const Layout& l) {
  const ModelConfig& m = job.model;
  const GpuSpec& g = job.gpu;
  const Efficiency& e = g.eff;
  const int64_t gpn = std::max<int64_t>(1, std::min(job.gpus_per_node, job.num_gpus()));
  const bool fp8 = l.precision == Precision::kF8;
  const bool fp32 = l.precision == Precision::kF32;
  const double elem_bytes = fp32 ? 4.0 : 2.0;
  const double p_lin = l.gemm_peak(g);
  const double p16 = fp32 ? g.peak(Precision::kF32) : (g.peak_bf16 > 0 ? g.peak_bf16 : g.peak_fp16);
  const double eff_lin = fp8 ? e.gemm_fp8 : e.gemm;

  const double tp = static_cast<double>(l.tp);
  const double h = static_cast<double>(m.dim);
  const double V = static_cast<double>(m.vocab_size);
  const double T = static_cast<double>(job.seq_len);
  const double layers = static_cast<double>(layers_per_stage(m, l.pp));
  const double nt = static_cast<double>(l.micro_batch) * T / static_cast<double>(l.cp);  // tokens per micro-batch
  const double layer_mm = static_cast<double>(m.params_per_layer() - 2 * m.dim);
  const double inter = 3.0 * static_cast<double>(m.ffn_dim);  // gate, up, product
  const bool sp = l.sequence_parallel && l.tp > 1;
  const bool full = l.recompute == ActRecompute::kFull;
  // Share of the blocks whose forward runs again in backward: all with full recompute, else the
  // blocks a layer-selective policy checkpoints whole.
  const double redo = full ? 1.0 : job.recompute_layer_share;

  StepTime st;
  st.micro_batches = micro_batches_per_step(job, l);
  const double mbs = static_cast<double>(st.micro_batches);

  // Compute of one micro-batch on the deepest stage (the LM head included: the slowest stage).
  // Forward, two backward GEMMs; full recompute adds the forward, a selective matmul policy its share.
  const double recomputed = full ? 1.0 : job.recompute_matmul_share + job.recompute_layer_share;
  const double f_lin = 2.0 * nt * layers * layer_mm / tp * (3.0 + recomputed);
  const double f_head = 2.0 * nt * V * h / tp * 3.0;
  double t_gemm = f_lin / (p_lin * eff_lin) + f_head / (p16 * e.gemm);
  const MoeSpec& moe = job.moe;
  if (moe.enabled()) {
    // The routed experts' GEMMs wait for the busiest expert: (load - 1) more of their FLOPs.
    const double f_routed =
        2.0 * nt * layers * 3.0 * h * static_cast<double>(moe.expert_ffn * moe.top_k) / tp * (3.0 + redo);
    t_gemm += f_routed * (moe_load_factor(moe) - 1.0) / (p_lin * eff_lin);
  }
  double t_attn = 0, score_bytes = 0;
  if (l.flash_attention) {
    // Causal flash attention executes half the QKᵀ/AV FLOPs: forward 2·T·h, backward 2.5x
    // that (it recomputes the scores); full recompute adds a forward.
    const double units = 7.0 + 2.0 * redo;
    const double eff_attn = job.hopper_attention ? e.attention_hopper : e.attention;
    t_attn = nt * T * h / tp * layers * units / (p16 * eff_attn);
  } else {
    const double units = 12.0 + 4.0 * redo;
    t_gemm += nt * T * h / tp * layers * units / (p16 * e.gemm);
    score_bytes = nt * T * static_cast<double>(m.n_heads) / tp * layers * 2.0 * 8.0;  // ~8 passes
  }
  // Element-wise traffic per token and layer, in elements: norms, residuals, RoPE, activation
  // functions and GEMM inputs/outputs, forward and backward (docs/planner.md counts them).
  const double replicated = 40.0 * h / (sp ? tp : 1.0);
  const double split = (20.0 * h + 6.0 * inter) / tp;
  double elem = nt * layers * (replicated + split) * elem_bytes;
  elem *= 1.0 + 0.5 * redo;
  // Selective recompute: the two norms again (read the input, write the output) and SwiGLU (read
  // gate and up, write the product).
  if (l.recompute == ActRecompute::kSelective)
    elem += nt * layers * (4.0 * h / (sp ? tp : 1.0) + inter / tp) * elem_bytes;
  if (fp8) {
    // The casts of every GEMM input (and weight, once per micro-batch) to fp8 or fp4 with their
    // scales, at the recipe's bytes per element; norms, softmax and the head stay 16-bit.
    const double per_elem = fp8_cast_bytes_per_element(l.fp8_recipe);
    elem += nt * layers * fp8_cast_elements_per_token(m, l.tp) * per_elem * (1.0 + 0.5 * redo);
    elem += layers * layer_mm / tp * per_elem;
  }
  elem += nt * V / tp * 16.0;                                                  // logits, softmax, gradient
  const double weights = (layers * layer_mm + V * h) / tp * elem_bytes * 4.0;  // read fwd, bwd; wgrad r/w
  const double t_mem = (elem + weights + score_bytes) * e.memory_traffic / g.hbm_bw;

  // Communication: the bytes the rank sends (plan/traffic.h) over the links' bus bandwidth.
  const RankTraffic traffic = rank_traffic(job, l);
  double t_tp = 0;
  if (l.tp > 1) t_tp = traffic.tp / mbs / bus_bandwidth(job, l.tp, std::min(l.tp, gpn));  // per micro-batch
  if (job.async_tp) t_tp = exposed(t_tp, t_gemm, e.overlap);                              // chunks beside the GEMMs
  double t_ep = 0;
  if (moe.enabled() && l.ep > 1) {
    // Expert-parallel ranks are tp apart inside the dp·cp group: gpn/tp of them share a node.
    const int64_t k_node = std::clamp<int64_t>(gpn / std::min(l.tp, gpn), 1, l.ep);
    const double bytes = layers * moe_all_to_all_bytes(moe, m.dim, nt / tp, l.ep, l.wire.activations, full);
    t_ep = bytes / bus_bandwidth(job, l.ep, k_node);
  }
  // Context parallelism: the ring's transfers beside the block attention (plan/context_parallel.h).
  const CpCost cp = cp_cost(job, l, t_attn);
  const double t_cp = cp.exposed / mbs;
  st.cp_comm = cp.seconds;
  st.cp_exposed = cp.exposed;
  const double t_mb = t_gemm + t_attn + t_mem + t_tp + t_ep + t_cp;
  st.gemm = t_gemm * mbs;
  st.attention = t_attn * mbs;
  st.memory = t_mem * mbs;
  st.tp_comm = t_tp * mbs;
  st.ep_comm = t_ep * mbs;

  const double t_pipe = mbs * t_mb;
  st.bubble = l.pp > 1 ? static_cast<double>(l.pp - 1) / static_cast<double>(l.vp) * t_mb : 0.0;
  if (l.pp > 1) {
    // Adjacent stages are tp·cp·dp ranks apart: another node once that spans a node.
    const bool cross = l.tp * l.cp * l.dp >= gpn;
    const double bw = cross ? g.network_bw * e.collective : g.nvlink_bw * e.collective;
    st.pp_comm = mbs * static_cast<double>(l.vp) * 2.0 * traffic.pp_message / bw;  // the send and its return
  }

  // Data parallelism over dp·cp ranks, spaced tp apart: gpn/tp of them share a node.
  const double params_local = static_cast<double>(rank_params(m, l.tp, l.pp, true, l.pp == 1));
  const int64_t group = l.dp * l.cp;
  if (group > 1) {
    const int64_t k = std::clamp<int64_t>(gpn / std::min(l.tp, gpn), 1, group);
    st.dp_comm = traffic.dp() / dp_bus_bandwidth(job, group, k, l.tp);
    st.dp_comm += dp_collectives(job, l, st.micro_batches, params_local) * collective_latency(g, (group + k - 1) / k);
    if (l.sync_each_layer)  // every layer waits for the collectives in flight: none overlaps
      st.dp_exposed = st.dp_comm;
    else if (l.zero >= 3)  // gathers and reduce-scatters run through every micro-batch
      st.dp_exposed = exposed(st.dp_comm, t_pipe + st.bubble, e.overlap);
    else if (l.zero == 2)  // reduce-scatters behind every backward, the gathers after the update
      st.dp_exposed = exposed(st.dp_comm, mbs * t_mb * 2.0 / 3.0, e.overlap);
    else  // behind the last backward
      st.dp_exposed = exposed(st.dp_comm, t_mb * 2.0 / 3.0, e.overlap);
  }
  double opt_params = params_local / (l.zero >= 1 ? static_cast<double>(group) : 1.0);
  if (moe.enabled()) {
    // The routed experts the rank holds replace the active model's top_k in its optimizer states,
    // sharded over the dp·cp/ep ranks holding the same experts; the gradients of those beyond
    // the active ones reduce over those ranks too (the active ones are in traffic.dp()).
    const double extra = layers * moe_extra_params_per_layer(moe, m.dim, l.ep, l.tp);
    const int64_t replicas = group / l.ep;
    const double zero_shards = l.zero >= 1 ? static_cast<double>(group) : 1.0;
    opt_params += -layers * moe_active_routed_params_per_layer(moe, m.dim, l.tp) / zero_shards +
                  layers * moe_held_params_per_layer(moe, m.dim, l.ep, l.tp) /
                      (l.zero >= 1 ? static_cast<double>(std::max<int64_t>(replicas, 1)) : 1.0);
    if (replicas > 1 && extra > 0) {
      const double n = static_cast<double>(replicas);
      const int64_t k = std::clamp<int64_t>(gpn / std::min(l.tp, gpn), 1, replicas);
      const double t_extra = 2.0 * (n - 1.0) / n * extra * l.wire.grads / bus_bandwidth(job, replicas, k);
      st.dp_comm += t_extra;
      st.dp_exposed += l.sync_each_layer
                           ? t_extra
                           : exposed(t_extra, l.zero >= 2 ? mbs * t_mb * 2.0 / 3.0 : t_mb * 2.0 / 3.0, e.overlap);
    }
  }
  st.optimizer = opt_params * 32.0 / g.hbm_bw;  // read p, g, m, v; write p, m, v (fp32) + 16-bit copy
  st.total = t_pipe + st.bubble + st.pp_comm + st.dp_exposed + st.optimizer;
  return st;
}

std::vector<StepTerm> dominant_terms(const StepTime& t) {
  std::vector<StepTerm> terms = {{"GEMMs", t.gemm},
                                 {"attention", t.attention},
                                 {"memory-bound", t.memory},
                                 {"TP communication", t.tp_comm},
                                 {"EP all-to-all", t.ep_comm},
                                 {"exposed CP communication", t.cp_exposed},
                                 {"pipeline sends", t.pp_comm},
                                 {"pipeline bubble", t.bubble},
                                 {"exposed DP communication", t.dp_exposed},
                                 {"optimizer", t.optimizer}};
  std::erase_if(terms, [](const StepTerm& x) { return !(x.seconds > 0); });
  std::stable_sort(terms.begin(), terms.end(),
                   [](const StepTerm& a, const StepTerm& b) { return a.seconds > b.seconds; });
  return terms;
}

}  // namespace ft::plan

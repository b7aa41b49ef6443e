#include "plan/context_parallel.h"

#include <algorithm>
#include <cmath>

#include "plan/memory_estimate.h"

namespace ft::plan {

double cp_link_bandwidth(const Job& job, const Layout& l) {
  const GpuSpec& g = job.gpu;
  const int64_t gpn = std::max<int64_t>(1, std::min(job.gpus_per_node, job.num_gpus()));
  const bool in_node = sat_mul(l.tp, l.cp) <= gpn;
  return (in_node ? g.nvlink_bw : g.network_bw) * g.eff.collective;
}

CpCost cp_cost(const Job& job, const Layout& l, double attention_s) {
  CpCost c;
  if (l.cp <= 1) return c;
  const ModelConfig& m = job.model;
  const double cp = static_cast<double>(l.cp), w = l.wire.attention;
  const double B = static_cast<double>(l.micro_batch), T = static_cast<double>(job.seq_len);
  const double local = B * T / cp;  // tokens of a micro-batch on the rank
  const double D = static_cast<double>(m.head_dim());
  const double H = static_cast<double>(std::max<int64_t>(1, m.n_heads / l.tp));
  const double Hkv = static_cast<double>(std::max<int64_t>(1, m.n_kv_heads / l.tp));
  const double layers = static_cast<double>(layers_per_stage(m, l.pp));
  const double mbs = static_cast<double>(micro_batches_per_step(job, l));
  const bool full = l.recompute == ActRecompute::kFull;
  const double bw = cp_link_bandwidth(job, l);
  double per_layer = 0;  // bytes per layer and micro-batch
  if (l.cp_attention == CpAttention::kRing) {
    const double block = local * 2.0 * Hkv * D * w;
    const double kv_sends = (cp - 1.0) * (full ? 3.0 : 2.0), dkv_hops = cp;
    per_layer = (kv_sends + dkv_hops) * block;
    c.buffers = 4.0 * block + T * 4.0;  // + every cp rank's positions (int32, on the rank's device)
    // Overlap: each K/V transfer runs beside one block's attention (forward 2/7 of attention's
    // work, backward 5/7, split evenly over the cp blocks by the zig-zag); the dK/dV hop carries
    // the block's result, so it waits for it and is not hidden.
    const double t_block = block / bw;
    const double per_block = attention_s / layers / cp;  // one block, forward and backward
    const double fwd = per_block * 2.0 / 7.0, bwd = per_block * 5.0 / 7.0;
    const double hidden_exposed =
        (cp - 1.0) * (std::max(0.0, t_block - fwd) * (full ? 2.0 : 1.0) + std::max(0.0, t_block - bwd));
    c.exposed = mbs * layers * (hidden_exposed + dkv_hops * t_block);
  } else {
    const double nq = H / cp, nkv = Hkv >= cp ? Hkv / cp : 1.0;
    const double qkv = local * (nq + 2.0 * nkv) * D, out = local * nq * D;  // one piece, elements
    const double fwd = qkv + out, bwd = 2.0 * qkv + 2.0 * out;              // q,k,v + out; q,k,v, out, dout + dqkv
    per_layer = (cp - 1.0) * ((full ? 2.0 : 1.0) * fwd + bwd) * w;
    c.buffers = (4.0 * qkv + 2.0 * out) * cp * w;  // whole-sequence q,k,v, d(qkv), out, dout; send/recv pieces
    // Replicated kv heads (cp does not divide Hkv'): d(qkv) summed from several ranks through a scratch
    // of the rank's (B, T/cp, (H' + 2 Hkv') D).
    // In bf16 the sums are fp32: two fp32 blocks of that size beside it (the sum, a widened piece).
    if (std::fmod(Hkv, cp) != 0) c.buffers += local * (H + 2.0 * Hkv) * D * (w + (w < 4 ? 8.0 : 0.0));
    c.exposed = mbs * layers * per_layer / bw;  // attention waits for every exchange
  }
  const double sums = 2.0 * (cp - 1.0) / cp * 16.0;  // the loss sum and the data hash over the group: two doubles
  c.bytes = mbs * layers * per_layer + sums;
  c.seconds = mbs * layers * per_layer / bw;
  return c;
}

}  // namespace ft::plan

#include "plan/traffic.h"

#include "plan/context_parallel.h"
#include "plan/memory_estimate.h"

namespace ft::plan {

WireBytes wire_bytes_of(const TrainerWires& w) {
  return {.activations = static_cast<double>(wire_bytes(w.activations)),
          .gemm_inputs = static_cast<double>(wire_bytes(w.gemm_inputs)),
          .attention = static_cast<double>(wire_bytes(w.attention)),
          .weights = static_cast<double>(wire_bytes(w.weights)),
          .grads = static_cast<double>(wire_bytes(w.grads))};
}

WireBytes published_wires(Precision p) {
  const double act = p == Precision::kF32 ? 4.0 : 2.0;
  return {.activations = act,
          .gemm_inputs = act,
          .attention = act,
          .weights = state_bytes_per_param(p).weights,
          .grads = 4.0};
}

RankTraffic rank_traffic(const Job& job, const Layout& l) {
  const ModelConfig& m = job.model;
  const WireBytes& w = l.wire;
  RankTraffic out;
  const double h = static_cast<double>(m.dim), V = static_cast<double>(m.vocab_size);
  const double nt = static_cast<double>(l.micro_batch * job.seq_len / l.cp);  // tokens per micro-batch
  const double mbs = static_cast<double>(micro_batches_per_step(job, l));
  const double blocks = static_cast<double>(layers_per_stage(m, l.pp));
  const bool one_stage = l.pp == 1, sp = l.sequence_parallel && l.tp > 1, full = l.recompute == ActRecompute::kFull;
  const double embed = one_stage ? 1.0 : 0.0, head = 1.0;

  if (l.tp > 1) {
    const double P = static_cast<double>(l.tp), ring = (P - 1) / P;
    // Per block and micro-batch: forward reduces the two row-parallel outputs, backward the
    // gradients of the two column-parallel inputs; full recompute runs the forward's again. The
    // vocabulary-parallel embedding's output and the head's input gradient add one each.
    const double reduces = (4.0 + (full ? 2.0 : 0.0)) * blocks + embed + head;
    double per_mb = 0;
    if (!sp) {
      per_mb = reduces * 2.0 * ring * nt * h * w.activations;
    } else {
      // Each reduce becomes a reduce-scatter onto the token shards; all-gathers bring back the
      // normed GEMM inputs (forward, the recompute, and backward for the weight gradients; the
      // head's final norm once) and the gradients of the reduce-scattered outputs (two per block,
      // the embedding's).
      const double shard = nt / P * h;
      const double gemm_gathers = (4.0 + (full ? 2.0 : 0.0)) * blocks + head;
      const double grad_gathers = 2.0 * blocks + embed;
      per_mb =
          (P - 1) * shard * (reduces * w.activations + gemm_gathers * w.gemm_inputs + grad_gathers * w.activations);
    }
    per_mb += 2.0 * ring * 3.0 * nt * 8.0;  // cross-entropy: row max and (sum, target logit), doubles
    out.tp = mbs * per_mb;
    // Norm weights under sequence parallelism see only a shard's tokens: their gradients are summed
    // over tp per unit, once a step (every micro-batch under ZeRO 2 and 3); fp32.
    if (sp) {
      const double syncs = l.zero >= 2 ? mbs : 1.0;
      out.tp += syncs * 2.0 * ring * (2.0 * blocks + head) * h * 4.0;
    }
    out.tp += 2.0 * ring * 8.0;  // the gradient norm
  }

  if (l.pp > 1) {
    const bool split = sp || (l.pp_scatter_gather && l.tp > 1);  // a tp shard of the residual stream
    out.pp_message = nt / (split ? static_cast<double>(l.tp) : 1.0) * h * w.activations;
    // A middle stage sends each micro-batch's activation on and its gradient back (with virtual
    // stages, every chunk); with two stages and one chunk each, one of the two.
    const double sends = static_cast<double>(l.vp) * 2.0 - (l.pp == 2 && l.vp == 1 ? 1.0 : 0.0);
    const double S = static_cast<double>(l.pp);
    out.pp = mbs * sends * out.pp_message + 2.0 * (S - 1) / S * 3.0 * 8.0;
  }

  out.cp = cp_cost(job, l, 0).bytes;

  const int64_t group = l.dp * l.cp;
  if (group > 1) {
    const double D = static_cast<double>(group), ring = (D - 1) / D;
    const double params = static_cast<double>(rank_params(m, l.tp, l.pp, one_stage, true));
    // The last unit (final norm and head) stays gathered from forward to backward under ZeRO 3.
    const double last_unit = h + (m.tie_embeddings && one_stage ? 0.0 : V * h / static_cast<double>(l.tp));
    switch (l.zero) {
      case 0:  // buckets all-reduced once a step
        out.dp_grads = 2.0 * ring * params * w.grads;
        break;
      case 1:
      case 2:  // reduce-scatter (ZeRO 2: every micro-batch), the updated weights all-gathered
        out.dp_grads = (l.zero == 2 ? mbs : 1.0) * ring * params * w.grads;
        out.dp_weights = ring * params * w.weights;
        break;
      default:  // every micro-batch: gather each unit for forward and for backward, reduce-scatter
        out.dp_grads = mbs * ring * params * w.grads;
        out.dp_weights = mbs * ring * (2.0 * params - last_unit) * w.weights;
    }
    // The gradient norm (sharded gradients), the loss and data hash: doubles.
    out.dp_control = 2.0 * ring * ((l.zero >= 1 ? 1.0 : 0.0) + 2.0) * 8.0;
  }
  return out;
}

}  // namespace ft::plan

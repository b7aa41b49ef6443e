// Bytes one rank sends per training step on each mesh axis: the trainer's collectives
// (Trainer::step, the ZeRO engines, the tensor-parallel model, the pipeline schedule) as formulas
// of the layout, each at its wire width (Layout::wire), counted as the communicator's ring
// algorithms send them (an all-reduce 2(P−1)/P of its buffer, a reduce-scatter or all-gather
// (P−1)/P). estimate_step_time divides these bytes by the links' bandwidth; the dry run
// (`fluxtrain train --dry-run`) counts the same collectives one by one on fake communicators and
// prints both (dryrun_nccl_traffic_test holds them equal on small layouts).
//
//   RankTraffic t = rank_traffic(job, layout);   t.tp, t.pp, t.dp() (bytes per step)
//
// The rank is the one the planner times: the last pipeline stage (the LM head and its
// cross-entropy; with one stage, the whole model). Not modelled: the gradient sums of replicated
// kv heads (tp > n_kv_heads), the per-unit padding of the arena to a multiple of dp, PowerSGD.
#pragma once

#include "parallel/wires.h"
#include "plan/job.h"

namespace ft::plan {

struct RankTraffic {
  double tp = 0;          // tensor parallelism: activations, cross-entropy statistics, partial gradients, norm
  double pp = 0;          // pipeline sends of the busiest stage, and the loss sums over the stages
  double pp_message = 0;  // one send: what a tp rank holds of one micro-batch's residual stream
  double cp = 0;          // context parallelism: the ring's K/V and dK/dV blocks or the all-to-alls, the loss sums
  double dp_grads = 0;    // gradient all-reduce or reduce-scatters
  double dp_weights = 0;  // ZeRO's weight all-gathers
  double dp_control = 0;  // gradient norm, loss and data hash (doubles)
  double dp() const { return dp_grads + dp_weights + dp_control; }
};

RankTraffic rank_traffic(const Job& job, const Layout& l);

// Per-element wire widths of this trainer's traffic (parallel/wires.h), for Layout::wire.
WireBytes wire_bytes_of(const TrainerWires& w);
// Published runs (Megatron-LM, FSDP mixed precision): activations and weights in the compute
// precision's 16 bits, gradients reduced in fp32.
WireBytes published_wires(Precision p);

}  // namespace ft::plan

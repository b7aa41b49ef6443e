// Step time of a training layout, built from the work it does:
//   compute  GEMM FLOPs at (peak × eff.gemm), fused attention at (peak × eff.attention) with
//            causal masking exploited, element-wise bytes (norms, activations, residuals,
//            casts, logits, weight reads) at the memory bandwidth × eff.memory_traffic;
//            recompute adds its forward work;
//   TP       4 all-reduces of the activations per layer (6 with full recompute) over NVLink,
//            not overlapped;
//   PP       the bubble (pp-1)/vp micro-batch times of the 1F1B schedule, p2p sends;
//   DP/ZeRO  gradient all-reduce (or reduce-scatter + all-gather) hidden behind the backward
//            pass; ZeRO-3 parameter all-gathers per micro-batch overlapped with compute; none
//            hidden when the run synchronizes the device at every layer (Layout::sync_each_layer);
//   step     plus the optimizer's pass over its (sharded) states.
// Collectives use NCCL's bus-bandwidth model: a group inside one node runs at NVLink speed;
// across nodes at the NICs of the group's members on one node.
//
//   StepTime t = estimate_step_time(job, layout);   t.total (s), t.bubble, t.dp_exposed, ...
#pragma once

#include <string>
#include <vector>

#include "plan/job.h"

namespace ft::plan {

struct StepTime {
  int64_t micro_batches = 1;  // per pipeline per step
  // Seconds per step on the slowest pipeline stage.
  double gemm = 0, attention = 0, memory = 0;  // compute of all micro-batches
  double tp_comm = 0, pp_comm = 0, bubble = 0;
  double ep_comm = 0;     // expert parallelism's all-to-alls (not overlapped)
  double cp_comm = 0;     // context parallelism's transfers in total (the ring's partly hidden)
  double cp_exposed = 0;  // the part that adds to the step (plan/context_parallel.h)
  double dp_comm = 0;     // data-parallel / ZeRO collectives in total (partly hidden)
  double dp_exposed = 0;  // the part that adds to the step
  double optimizer = 0;
  double total = 0;
};

StepTime estimate_step_time(const Job& job, const Layout& l);

// The terms that add up to StepTime::total, largest first, as (name, seconds): "GEMMs",
// "attention", "memory-bound", "TP communication", "EP all-to-all", "exposed CP communication",
// "pipeline sends", "pipeline bubble",
// "exposed DP communication", "optimizer". Terms of zero seconds are left out.
struct StepTerm {
  std::string name;
  double seconds = 0;
};
std::vector<StepTerm> dominant_terms(const StepTime& t);

// fp8 (fp4) casts: bytes moved per element cast under a recipe (read the 16-bit value, write it
// in both orientations, plus an amax read for current scaling and NVFP4, and block scales), and
// elements cast per token and layer on a rank of tp (forward GEMM inputs, backward output
// gradients). docs/planner.md counts them.
double fp8_cast_bytes_per_element(Fp8Recipe r);
double fp8_cast_elements_per_token(const ModelConfig& m, int64_t tp);

// Latency of one collective over `nodes` nodes (0 within one node): NCCL's base latency plus a
// network hop per inter-node step; a ring all-reduce takes 2(n-1) steps, a tree 2⌈log2 n⌉, and
// NCCL picks the faster.
double collective_latency(const GpuSpec& g, int64_t nodes);
// Data-parallel collectives one rank launches per step: gradient buckets of 25 M elements (one
// all-reduce each; ZeRO 1-2 a reduce-scatter and an all-gather), ZeRO-3 two gathers and a
// reduce-scatter per layer and micro-batch.
double dp_collectives(const Job& job, const Layout& l, int64_t micro_batches, double params_local);

// FLOPs per token actually executed (model FLOPs plus the recomputed forward), in the same
// convention as ModelConfig::train_flops_per_token (attention counted without causal savings).
double hardware_flops_per_token(const Job& job, const Layout& l);

}  // namespace ft::plan

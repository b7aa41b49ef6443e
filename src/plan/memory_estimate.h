// Memory per GPU of a training step: model states by ZeRO stage and precision, activations
// (Korthikanti et al. 2022 with sequence parallelism and recompute, times the micro-batches
// the pipeline schedule keeps in flight), logits, communication buffers, the runtime's share
// and a fragmentation margin. On the "cpu" device the numbers are the trainer's own
// allocations (model/layout_sizes.h), category by category.
//
//   MemoryBreakdown m = estimate_memory(job, layout);
//   if (!m.fits()) ...;   m.total();  m.items() -> {("parameters", bytes), ...}
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "plan/job.h"

namespace ft::plan {

struct MemoryBreakdown {
  // Category names follow the trainer's MemCategory (tensor/memory.h).
  double parameters = 0;  // weights as used by forward/backward (16-bit copies; fp32 on cpu)
  double gradients = 0;
  double optimizer_state = 0;  // fp32 master weights + AdamW m, v (GPU); m, v (cpu)
  double activations = 0;      // kept for backward, in flight under the pipeline schedule
  double workspace = 0;        // logits and loss (GPU: whole micro-batch; cpu: one chunk)
  double communication = 0;    // gradient buckets, gathered ZeRO-3 layers
  double runtime = 0;          // CUDA context, library workspaces
  double fragmentation = 0;    // allocator margin (10% of the above on GPUs)
  double capacity = 0;         // device memory

  double total() const;
  bool fits() const { return total() <= capacity; }
  std::vector<std::pair<std::string, double>> items() const;  // name, bytes (non-zero categories)
};

// Bytes of model state per parameter for a precision: {weights, gradients, optimizer}.
// Mixed precision (bf16/fp16/fp8): 2 + 2 + 12 (fp32 master, m, v) as in the ZeRO paper;
// fp32: 4 + 4 + 8.
struct StateBytes {
  double weights, gradients, optimizer;
};
StateBytes state_bytes_per_param(Precision p);

// Micro-batches whose activations the first pipeline stage holds at the peak: 1 without
// pipelining, min(pp, m) under 1F1B, min(pp + (pp-1)/vp, m) under interleaving — Korthikanti et
// al. 2022's factor (1 + (pp-1)/(pp·vp)) while the step has enough micro-batches, capped by the
// m micro-batches it has (Megatron-LM's interleaved warm-up stops at all of them); m =
// micro-batches per step.
double micro_batches_in_flight(const Job& job, const Layout& l);
// The same for pipeline stage `stage`: 1F1B min(pp − s, m); interleaved
// min((2(pp − s − 1) + (vp − 1)·pp + 1)/vp, m) — the warm-up chunks the schedule runs on it.
double micro_batches_in_flight(const Job& job, const Layout& l, int64_t stage);

// Blocks on pipeline stage `stage`: ⌈L/pp⌉, except that when pp does not divide L the last stage
// (the head) and then the first (the embedding) hold one block fewer, as a balanced split does.
int64_t stage_layers(const ModelConfig& m, int64_t pp, int64_t stage);

// The largest of the stages' memory (estimate_stage_memory): what every rank must fit.
MemoryBreakdown estimate_memory(const Job& job, const Layout& l);
// One rank of pipeline stage `stage` (0 ≤ stage < pp): its share of the parameters (the first
// stage holds the embedding, the last the final norm and the LM head) and the activations of
// its layers for the micro-batches in flight on it. Ranks of one stage need the same memory.
// `fluxtrain train --dry-run` prints this for every rank.
MemoryBreakdown estimate_stage_memory(const Job& job, const Layout& l, int64_t stage);

}  // namespace ft::plan

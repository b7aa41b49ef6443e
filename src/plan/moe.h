// Mixture of experts in the planner. The job's ModelConfig describes the *active* model: its MLP
// is the experts a token goes through (top_k routed + shared, each of width expert_ffn), so FLOPs,
// MFU (6 × active parameters) and activations follow from it unchanged. What MoE adds is priced
// here: the routed experts a rank holds beyond the active ones (memory, gradients, optimizer),
// the slowest expert's extra tokens (capacity factor or load imbalance), and expert
// parallelism's all-to-all dispatch and combine.
//
//   MoeSpec moe;  moe.experts = 8;  moe.top_k = 2;  moe.expert_ffn = 14336;   // Mixtral 8x7B
//   double extra = moe_extra_params_per_layer(moe, 4096, /*ep=*/8, /*tp=*/1);
//   double bytes = moe_all_to_all_bytes(moe, 4096, tokens, /*ep=*/8, 2.0, false);
#pragma once

#include <cstdint>

namespace ft::plan {

// Max over mean tokens per expert of a dropless router with a load-balancing loss: an
// assumption, not fitted (the developers' published-runs file has no MoE run to fit it to).
inline constexpr double kDroplessImbalance = 1.2;

struct MoeSpec {
  int64_t experts = 0;                    // routed experts per layer; 0 = dense
  int64_t top_k = 1;                      // routed experts per token
  int64_t expert_ffn = 0;                 // each expert's (SwiGLU) width
  int64_t shared = 0;                     // experts every token goes through
  double capacity_factor = 0;             // > 0: every expert's GEMMs padded to capacity_factor × its mean tokens
  double imbalance = kDroplessImbalance;  // dropless (capacity_factor 0): the slowest expert's load
  bool enabled() const { return experts > 1; }
};

// Tokens the busiest expert (rank) computes relative to the mean: the capacity factor, else the
// dropless imbalance; 1 for a dense model.
double moe_load_factor(const MoeSpec& moe);

// Parameters a rank holds per MoE layer beyond the ModelConfig's active MLP: it holds experts/ep
// routed experts, the ModelConfig counts top_k of them (negative when experts/ep < top_k).
double moe_extra_params_per_layer(const MoeSpec& moe, int64_t hidden, int64_t ep, int64_t tp);

// Routed-expert parameters per layer on a rank: those the active model counts (top_k experts)
// and those the rank holds (experts/ep); each expert is 3·hidden·expert_ffn, split over tp.
double moe_active_routed_params_per_layer(const MoeSpec& moe, int64_t hidden, int64_t tp);
double moe_held_params_per_layer(const MoeSpec& moe, int64_t hidden, int64_t ep, int64_t tp);

// Bytes one rank sends per MoE layer and micro-batch of `tokens` tokens in all-to-alls: each
// token's hidden state to its top_k experts and back (dispatch, combine), forward and backward
// (and again in a full recompute), the share (ep-1)/ep leaving the rank.
double moe_all_to_all_bytes(const MoeSpec& moe, int64_t hidden, double tokens, int64_t ep, double elem_bytes,
                            bool full_recompute);

}  // namespace ft::plan

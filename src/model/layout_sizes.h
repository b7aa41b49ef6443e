// A model's sizes under a parallel layout, by the published formulas the planner prices GPU runs
// with: parameters per pipeline stage and tensor-parallel rank, and activation bytes per block
// (Korthikanti et al. 2022, generalised to GQA and SwiGLU). The CPU trainer's exact buffers are in
// model/activation_sizes.h, which the planner's "cpu" device sums.
//
//   int64_t p = ft::rank_params(model_preset("llama2-70b"), /*tp=*/8, /*pp=*/4, true, false);
//   double a = ft::gpu_layer_activation_bytes(model, tokens, seq_len, tp, /*sp=*/true,
//                                             ActRecompute::kSelective);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.h"

namespace ft {

// Activation recomputation as the planner sees it: the trainer's model.recompute, one meaning of
// each mode (model/model_config.h). "selective" is the trainer's: keep the GEMM outputs, the
// attention statistics and the residual x_mid; recompute the norms and SwiGLU. (Korthikanti et
// al. 2022's "selective", the attention core, changes nothing with flash attention, which
// recomputes the scores in backward anyway; published runs that name it count as "none".)
using ActRecompute = Recompute;
inline const char* act_recompute_name(ActRecompute r) {
  return recompute_name(r);
}  // "none", "selective", "full"

// Blocks held by one pipeline stage.
int64_t layers_per_stage(const ModelConfig& m, int64_t pp);

// Parameters held by one rank (its stage, its tensor-parallel shard).
int64_t rank_params(const ModelConfig& m, int64_t tp, int64_t pp, bool first_stage, bool last_stage);

// GPU activation bytes of one transformer block for one micro-batch of `tokens` tokens on one
// rank (tokens = micro_batch · seq_len / context-parallel degree), 16-bit activations.
// Korthikanti et al. 2022 count 34·s·b·h + 5·a·s²·b bytes for a GPT block (eq. 1); here the
// same counting for a LLaMA block (RMSNorm, GQA, SwiGLU, no dropout):
//   replicated across TP ranks unless sequence-parallel: both norm inputs and both GEMM inputs
//   (4 × 2·t·h); split by TP: Q, K, V, the attention output, the SwiGLU gate, up and product.
// flash_attention = false adds the stored softmax output (2·a·s·t bytes: the paper's 5·a·s²·b
// without its two dropout terms). Selective recompute (the trainer's) drops the two GEMM inputs
// that are norm outputs and the SwiGLU product; full recompute keeps only the block input (2·t·h).
double gpu_layer_activation_bytes(const ModelConfig& m, double tokens, int64_t seq_len, int64_t tp,
                                  bool sequence_parallel, ActRecompute rc, bool flash_attention = true);

}  // namespace ft

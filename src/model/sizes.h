// Memory sizes of a training step that the trainer allocates and the planner predicts. Both
// call these functions, so the planner's estimate for this machine matches the trainer's own
// allocator accounting by construction (see docs/planner.md).
//
//   ft::StepShape s{.micro_batch = 4, .seq_len = 256};
//   ft::TrainerMemory m = ft::cpu_trainer_memory(model_preset("llama-125m"), s);
//   m.activations;                       // bytes in MemCategory::kActivations on one rank
//   for (auto& b : ft::block_activation_buffers(model, s)) { /* b.name, b.elements */ }
//
//   // GPU training (16-bit activations), Korthikanti et al. 2022 generalised to GQA + SwiGLU:
//   double a = ft::gpu_layer_activation_bytes(model, tokens, seq_len, tp, /*sp=*/true,
//                                             ActRecompute::kSelective);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.h"

namespace ft {

// Activation recomputation as the planner sees it: the trainer has none/full; GPU frameworks
// also recompute only the attention core ("selective", Korthikanti et al. 2022, Sec. 5).
enum class ActRecompute : uint8_t { kNone = 0, kSelective = 1, kFull = 2 };
const char* act_recompute_name(ActRecompute r);  // "none", "selective", "full"

// One rank's share of one micro-batch step.
struct StepShape {
  int64_t micro_batch = 1;        // sequences per forward/backward on this rank (B)
  int64_t seq_len = 64;           // tokens per sequence (T)
  int64_t tp = 1;                 // tensor-parallel degree: heads and ffn split, C-sized replicated
  int64_t pp = 1;                 // pipeline stages: this rank holds ceil(n_layers / pp) blocks
  int64_t dp = 1;                 // data-parallel degree (for ZeRO sharding)
  int zero = 0;                   // 0: replicated, 1: optimizer sharded, 2: + grads, 3: + params
  bool recompute = false;         // the trainer's model.recompute = "full"
  int64_t loss_chunk_tokens = 0;  // train.loss_chunk_tokens; 0 = auto
  bool last_stage = true;         // holds the final norm and LM head (pp > 1: the last stage)
  bool first_stage = true;        // holds the embedding table
};

// A named buffer of `elements` fp32 values, allocated `count` times.
struct SizedBuffer {
  std::string name;
  int64_t elements = 0;
  int64_t count = 1;
  int64_t total() const { return elements * count; }
};

// Blocks held by one pipeline stage.
int64_t layers_per_stage(const ModelConfig& m, int64_t pp);

// Tokens per LM-head/cross-entropy chunk: `configured` if > 0, else ~32 MiB of fp32 logits;
// never more than the micro-batch's tokens.
int64_t resolve_loss_chunk_tokens(int64_t configured, int64_t vocab_size, int64_t tokens);

// The tensors one block keeps for backward, per micro-batch of N = B·T tokens (fp32, no
// recompute), in the trainer's order: xn1, rstd1, qkv, att_out, lse, x_mid, xn2, rstd2, gate_up, h.
std::vector<SizedBuffer> block_activation_buffers(const ModelConfig& m, const StepShape& s);
// Activation gradients and scratch of the backward pass (allocated once, reused by every block).
std::vector<SizedBuffer> backward_scratch_buffers(const ModelConfig& m, const StepShape& s);
// Everything in MemCategory::kActivations: per-block sets (all blocks, or one block when
// recomputing), residual stream buffers (each block's input plus the stream after the last
// block), the final norm's output and rstd, and the backward scratch.
std::vector<SizedBuffer> activation_buffers(const ModelConfig& m, const StepShape& s);

// Bytes per rank of the CPU trainer (fp32 weights, fp32 gradients, AdamW m and v in fp32).
struct TrainerMemory {
  int64_t parameters = 0;       // MemCategory::kParameters
  int64_t gradients = 0;        // kGradients
  int64_t optimizer_state = 0;  // kOptimizerState (AdamW m, v)
  int64_t activations = 0;      // kActivations
  int64_t workspace = 0;        // kWorkspace (the logits chunk; dlogits in place)
  int64_t total() const { return parameters + gradients + optimizer_state + activations + workspace; }
};
// Parameters held by one rank (its stage, its tensor-parallel shard).
int64_t rank_params(const ModelConfig& m, int64_t tp, int64_t pp, bool first_stage, bool last_stage);
TrainerMemory cpu_trainer_memory(const ModelConfig& m, const StepShape& s);

// GPU activation bytes of one transformer block for one micro-batch of `tokens` tokens on one
// rank (tokens = micro_batch · seq_len / context-parallel degree), 16-bit activations.
// Korthikanti et al. 2022 count 34·s·b·h + 5·a·s²·b bytes for a GPT block (eq. 1); here the
// same counting for a LLaMA block (RMSNorm, GQA, SwiGLU, no dropout):
//   replicated across TP ranks unless sequence-parallel: both norm inputs and both GEMM inputs
//   (4 × 2·t·h); split by TP: Q, K, V, the attention output, the SwiGLU gate, up and product.
// flash_attention = false adds the stored softmax output (2·a·s·t bytes: the paper's 5·a·s²·b
// without its two dropout terms). Selective recompute drops that term (with flash attention it
// is already absent); full recompute keeps only the block input (2·t·h).
double gpu_layer_activation_bytes(const ModelConfig& m, double tokens, int64_t seq_len, int64_t tp,
                                  bool sequence_parallel, ActRecompute rc, bool flash_attention = true);

}  // namespace ft

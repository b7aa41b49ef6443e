// Activation sizes of the LLaMA model on this trainer, as shapes. Activations::allocate
// allocates exactly these, and the planner (plan/) sums the same shapes, so the planner's
// memory for a layout and the trainer's allocator accounting agree by construction.
//
//   auto s = block_activation_shapes(cfg, B, T);      // [{"xn1", {N, C}}, ...]
//   int64_t bytes = kept_activation_bytes(cfg, B, T, chunk, /*recompute=*/false);
//   int64_t sp = kept_activation_bytes(cfg, B, T, chunk, false, TpSplit{4, true});  // one tp rank's
//
// Under tensor parallelism a rank holds its share of the heads, the ffn and the vocabulary; with
// sequence parallelism also only N/tp tokens of the residual stream, the norms and their outputs.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/model_config.h"
#include "tensor/tensor.h"

namespace ft {

using NamedShapes = std::vector<std::pair<std::string, Shape>>;

// How tensor parallelism divides one rank's activations.
struct TpSplit {
  int64_t size = 1;                // parallel.tp
  bool sequence_parallel = false;  // parallel.sequence_parallel
};

// One block's buffers kept for backward (see model/activations.h for what each is for).
NamedShapes block_activation_shapes(const ModelConfig& m, int64_t B, int64_t T, const TpSplit& tp = {});
// Backward scratch shared by all blocks of a micro-batch (with sequence parallelism also the two
// (N, C) buffers around the tensor-parallel matmuls, used by forward too).
NamedShapes backward_scratch_shapes(const ModelConfig& m, int64_t B, int64_t T, const TpSplit& tp = {});
// Residual stream, final norm, loss and one logits chunk.
NamedShapes model_activation_shapes(const ModelConfig& m, int64_t B, int64_t T, int64_t chunk,
                                    const TpSplit& tp = {});

// Tokens per LM-head chunk: the configured value, or ~32 MiB of fp32 logits.
int64_t loss_chunk_tokens(const ModelConfig& m, int64_t configured, int64_t tokens);

// fp32 bytes one micro-batch of (B, T) keeps (Activations), and the backward scratch one model
// holds (BackwardScratch) — a pipeline stage keeps several of the first and one of the second.
int64_t kept_activation_bytes(const ModelConfig& m, int64_t B, int64_t T, int64_t chunk, bool recompute,
                              const TpSplit& tp = {});
int64_t scratch_activation_bytes(const ModelConfig& m, int64_t B, int64_t T, const TpSplit& tp = {});

}  // namespace ft

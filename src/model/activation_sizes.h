// Activation sizes of the LLaMA model on this trainer, as shapes. Activations::allocate
// allocates exactly these, and the planner (plan/) sums the same shapes, so the planner's
// memory for a layout and the trainer's allocator accounting agree by construction.
//
//   auto s = block_activation_shapes(cfg, B, T);      // [{"xn1", {N, C}}, ...]
//   int64_t bytes = kept_activation_bytes(cfg, B, T, chunk, /*recompute=*/false);
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/model_config.h"
#include "tensor/tensor.h"

namespace ft {

using NamedShapes = std::vector<std::pair<std::string, Shape>>;

// One block's buffers kept for backward (see model/activations.h for what each is for).
NamedShapes block_activation_shapes(const ModelConfig& m, int64_t B, int64_t T);
// Backward scratch shared by all blocks of a micro-batch.
NamedShapes backward_scratch_shapes(const ModelConfig& m, int64_t B, int64_t T);
// Residual stream, final norm, loss and one logits chunk.
NamedShapes model_activation_shapes(const ModelConfig& m, int64_t B, int64_t T, int64_t chunk);

// Tokens per LM-head chunk: the configured value, or ~32 MiB of fp32 logits.
int64_t loss_chunk_tokens(const ModelConfig& m, int64_t configured, int64_t tokens);

// fp32 bytes one micro-batch of (B, T) keeps (Activations), and the backward scratch one model
// holds (BackwardScratch) — a pipeline stage keeps several of the first and one of the second.
int64_t kept_activation_bytes(const ModelConfig& m, int64_t B, int64_t T, int64_t chunk, bool recompute);
int64_t scratch_activation_bytes(const ModelConfig& m, int64_t B, int64_t T);

}  // namespace ft

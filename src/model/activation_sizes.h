// Activation sizes of the LLaMA model on this trainer, as shapes. Activations::allocate
// allocates exactly these, and the planner (plan/) sums the same shapes, so the planner's
// memory for a layout and the trainer's allocator accounting agree by construction.
//
//   auto s = block_activation_shapes(cfg, B, T);      // [{"xn1", {N, C}}, ...]
//   int64_t bytes = kept_activation_bytes(cfg, B, T, chunk, Recompute::kNone);
//   int64_t stage = kept_activation_bytes(cfg, B, T, chunk, Recompute::kNone, LayerSpan{2, 2, true});  // a pipeline
//   chunk int64_t sp = kept_activation_bytes(cfg, B, T, chunk, Recompute::kNone, {}, TpSplit{4, true});  // one tp
//   rank's
//
// A pipeline chunk keeps the residual stream of its own layers only (LayerSpan). Under tensor
// parallelism a rank holds its share of the heads, the ffn and the vocabulary; with sequence
// parallelism also only N/tp tokens of the residual stream, the norms and their outputs (TpSplit).
// The two compose: a stage's tensor-parallel rank keeps its span's layers of its own shard.
//
// With bf16 compute (Precision::kBF16) the tensors that only ever feed a GEMM are bf16: the norm
// outputs xn1, xn2, xf and the SwiGLU output h (kept), the SwiGLU gradient dgu, and the
// bf16-only scratch: dy16 (an fp32 gradient rounded once for the two GEMMs that read it) and
// dlogits16 (one chunk's logits gradient); so are the GEMM outputs whose consumer rounds anyway,
// rounded in the GEMM's epilogue: qkv (RoPE), gu (SwiGLU), dh (SwiGLU's backward) and datt (the
// bf16 attention's backward). The fp32 dqkv scratch is then not needed.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/ops.h"
#include "model/model_config.h"
#include "tensor/tensor.h"

namespace ft {

using NamedShapes = std::vector<std::pair<std::string, Shape>>;

// The layers one Activations set serves: the whole model (the default), or a pipeline chunk's
// blocks [first, first + count) with or without the final norm, LM head and loss.
struct LayerSpan {
  int64_t first = 0;
  int64_t count = -1;  // < 0: through the last layer
  bool head = true;
  int64_t layers(const ModelConfig& m) const { return count < 0 ? m.n_layers - first : count; }
};

// How tensor parallelism divides one rank's activations.
struct TpSplit {
  int64_t size = 1;                // parallel.tp
  bool sequence_parallel = false;  // parallel.sequence_parallel
  // Tokens of the residual stream a rank holds out of n: all, or its n/size shard.
  int64_t tokens(int64_t n) const { return sequence_parallel && size > 1 ? n / size : n; }
};

// One block's buffers kept for backward (see model/activations.h for what each is for).
NamedShapes block_activation_shapes(const ModelConfig& m, int64_t B, int64_t T, const TpSplit& tp = {});
// Whether block buffer `name` is refilled just before the block's backward under policy r, so
// one set serves every block: full, all of them; selective, the norms' outputs and statistics
// (xn1, rstd1, xn2, rstd2) and SwiGLU's output h — cheap element-wise work, no GEMM and no
// communication (they read the block input, x_mid and gu, which stay kept).
bool recomputed_in_backward(const std::string& name, Recompute r);
// Backward scratch shared by all blocks of a micro-batch (with sequence parallelism also the two
// (N, C) buffers around the tensor-parallel matmuls, used by forward too; with bf16 compute dy16
// instead of dqkv).
NamedShapes backward_scratch_shapes(const ModelConfig& m, int64_t B, int64_t T, const TpSplit& tp = {},
                                    Precision precision = Precision::kF32);
// Residual stream ("res<i>": the input of layer i, and the span's output), then — when the span
// has the head — final norm, loss and one logits chunk (and with bf16 compute its gradient).
NamedShapes model_activation_shapes(const ModelConfig& m, int64_t B, int64_t T, int64_t chunk, LayerSpan span = {},
                                    const TpSplit& tp = {}, Precision precision = Precision::kF32);
// The element type of the named buffer at this precision.
DType activation_dtype(const std::string& name, Precision precision);

// Tokens per LM-head chunk: the configured value, or ~32 MiB of fp32 logits — ~128 MiB with bf16
// compute, whose GEMMs need about a thousand rows to amortise re-laying out the head's weight on
// every call (bench/README.md, "bf16 training").
int64_t loss_chunk_tokens(const ModelConfig& m, int64_t configured, int64_t tokens,
                          Precision precision = Precision::kF32);

// Bytes one micro-batch of (B, T) keeps (Activations) for a span of layers, and the backward
// scratch one model holds (BackwardScratch) — a pipeline stage keeps several of the first (one
// per micro-batch in flight on each of its chunks) and one of the second. Under recompute r each
// block keeps its buffers that are not recomputed_in_backward, and one shared set holds the rest.
int64_t kept_activation_bytes(const ModelConfig& m, int64_t B, int64_t T, int64_t chunk, Recompute r,
                              LayerSpan span = {}, const TpSplit& tp = {}, Precision precision = Precision::kF32);
int64_t scratch_activation_bytes(const ModelConfig& m, int64_t B, int64_t T, const TpSplit& tp = {},
                                 Precision precision = Precision::kF32);

}  // namespace ft

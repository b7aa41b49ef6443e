// Activations: what one micro-batch keeps between forward and backward, as explicit buffers.
// With model.recompute = "full" only the residual stream (each block's input) is kept per
// block; one shared set of block buffers is refilled by re-running the block's forward just
// before its backward — a switch, not a rewrite. With "selective" each block keeps the buffers
// marked K below (GEMM outputs, attention's lse, the residual x_mid: recomputing them needs a
// GEMM) and shares one set of the others (R: the norms and SwiGLU's output), which are
// recomputed from the kept ones just before the block's backward (recomputed_in_backward).
//
// Per block, N = B·T tokens:                       kept for backward by          selective
//   xn1   (N, C)   input_layernorm output           qkv matmul (dW)               R
//   rstd1 (N)                                       input_layernorm backward      R
//   qkv   (N, (H + 2Hkv)·D) after RoPE             attention backward            K (bf16 compute: bf16)
//   att   (N, H·D) attention output                o_proj (dW), attention bwd    K (bf16 too)
//   lse   (B, H, T)                                 attention backward            K
//   x_mid (N, C)   residual after attention         post_attention_layernorm bwd  K
//   xn2   (N, C), rstd2 (N)                         gate/up matmul, norm backward R
//   gu    (N, 2F)  gate and up projections          SwiGLU backward               K (bf16 compute: bf16)
//   h     (N, F)   SwiGLU output                    down_proj (dW)                R
// The sizes are computed by model/activation_sizes.h, which the planner shares. A pipeline chunk
// allocates a set for its own layers only (LayerSpan); layers keep their global numbers. Under
// tensor parallelism a rank holds its share of heads/ffn/vocabulary, and with sequence
// parallelism xn*, rstd*, x_mid and the residual stream hold only its Ns = N/tp tokens (TpSplit).
// With bf16 compute xn1, xn2, h (and xf, dgu) are bf16: they only feed GEMMs; qkv, gu (and the
// scratch's dh, datt) are the GEMMs' bf16-rounded outputs (activation_dtype()); allocate with the
// model's precision.
#pragma once

#include <cstdint>
#include <vector>

#include "model/activation_sizes.h"
#include "model/model_config.h"
#include "tensor/tensor.h"

namespace ft {

struct BlockActivations {
  Tensor xn1, rstd1, qkv, att, lse, x_mid, xn2, rstd2, gu, h;
  // With shared, the buffers m.recompute refills before each backward are shared's, not new.
  void allocate(const ModelConfig& m, int64_t B, int64_t T, const TpSplit& tp = {},
                Precision precision = Precision::kF32, Device dev = Device::kCPU,
                const BlockActivations* shared = nullptr);
};

// Scratch for backward, shared by all blocks of a micro-batch. full_in/full_out (sequence
// parallelism only) hold the (N, C) all-gathered input of a column-parallel matmul and the
// partial output of a row-parallel one, in forward and backward. dy16 (bf16 compute only) holds
// a gradient rounded once for the two GEMMs that read it, then the bf16 attention's d(qkv); dh and
// datt are then bf16 (rounded by their GEMMs) and dqkv is not allocated.
struct BackwardScratch {
  Tensor d_res, d_mid, d_xn, dh, dgu, datt, dqkv, full_in, full_out, dy16;
  void allocate(const ModelConfig& m, int64_t B, int64_t T, const TpSplit& tp = {},
                Precision precision = Precision::kF32, Device dev = Device::kCPU);
};

struct Activations {
  int64_t B = 0, T = 0;
  int64_t first_layer = 0;               // the span's first layer (0 for the whole model)
  std::vector<Tensor> res;               // layers + 1 residual-stream buffers (Ns, C)
  std::vector<BlockActivations> blocks;  // one set per layer, or 1 with full recompute
  Tensor xf, rstdf, dxf;                 // final norm output (Ns, C), its rstd, its gradient (N, C) (with the head)
  Tensor losses;                         // (N) per-token loss
  Tensor logits, lse;                    // one chunk: (chunk, V), (chunk)
  Tensor target_logit;                   // (chunk), tensor parallelism only
  Tensor dlogits16;                      // (chunk, V) bf16, bf16 compute only
  // The micro-batch's input, loaded by Llama::load_batch (the stages with the embedding or the
  // head), as workspace: the activation accounting counts what the layers keep.
  Tensor tokens, targets;  // (N) int32 each; a target < 0 has no loss
  Tensor local_targets;    // (chunk) int32: one chunk's targets in this rank's vocabulary rows
  int64_t chunk = 0;
  Precision precision = Precision::kF32;  // what the set was allocated for (the model's)

  // On dev (the model's context's device, Llama::context()).
  void allocate(const ModelConfig& m, int64_t B, int64_t T, int64_t chunk_tokens, LayerSpan span = {},
                const TpSplit& tp = {}, Precision precision = Precision::kF32, Device dev = Device::kCPU);
  BlockActivations& block(int64_t layer) {
    return blocks.size() == 1 ? blocks[0] : blocks[static_cast<size_t>(layer - first_layer)];
  }
  Tensor& input(int64_t layer) { return res[static_cast<size_t>(layer - first_layer)]; }  // (Ns, C)
  Tensor& output(int64_t layer) { return res[static_cast<size_t>(layer - first_layer + 1)]; }
};

}  // namespace ft

// Llama: the LLaMA architecture on ops.h, single-device. Forward and backward are written by
// hand, unit by unit (embedding, blocks, head); parallelism is applied from outside through
// ParamAccess (where weights and gradients live, and hooks around each unit) and TpComm (the
// tensor-parallel conjugate communication pairs).
//
//   ParamLayout layout = ParamLayout::llama(cfg);
//   FlatParams params(layout);  layout.init(params.weight_arena(), seed);
//   Llama model(ctx, cfg, layout, Precision::kF32);   // ctx: where its ops run (tensor/exec_context.h)
//   Activations acts;  acts.allocate(cfg, B, T, chunk);
//   DeviceScalars loss(ctx, 1);                     // the loss sum stays on ctx's device
//   model.forward_backward(params, acts, seqs, 1.0f / (B * T), loss.at(0));
//   double loss_sum = loss.read_back()[0];
//
// seqs is (B, T + 1) tokens: inputs [0, T), targets [1, T]. A target < 0 is ignored.
//
// Precision::kBF16: every GEMM reads bf16 operands (AMX) and accumulates in fp32. The weights
// come from the ParamAccess's bf16 copy (weights_bf16(), rounded once per update) or are rounded
// here; the activations a GEMM reads are written in bf16 by the kernel that makes them (norms,
// SwiGLU, cross-entropy backward, attention) or rounded once for the two GEMMs that read them
// (gradients). Attention itself runs on bf16 q, k, v (RoPE writes them; cuDNN's fused attention
// on a GPU), as autocast's SDPA does. Allocate the Activations with the model's precision.
//
// A pipeline stage builds its Llama on a layout holding a subset of the units
// (ParamLayout::llama(cfg, align, units)) and calls only the units it holds, over Activations
// allocated for its layers (LayerSpan); whole-model passes need every unit.
//
// Tensor parallelism: give it this rank's layout (ParamLayout::llama(cfg, align, units,
// {tp_rank, tp})) and a TpComm over the group (parallel/tensor_parallel); allocate the activations
// with the model's TpSplit (tp_split()): with sequence parallelism the residual stream holds
// N/tp tokens. Both compose: a stage's tensor-parallel rank holds its shard of the stage's units.
//   TpGroup tp(mesh.tp(), /*sequence_parallel=*/false);
//   Llama model(ctx, cfg, ParamLayout::llama(cfg, 1, {}, {mesh.coord().tp, tp.size()}), Precision::kF32, &tp);
//   acts.allocate(cfg, B, T, chunk, {}, model.tp_split(), model.precision());
//
// Context parallelism: give it a ContextSplit (model/context_split.h; RingAttention over the cp
// group) and allocate the activations for T / cp tokens; seqs stay the whole samples (B, T + 1).
// The model loads its zig-zag chunks, rotates them by their true positions and hands attention to
// the split (model/llama_cp.cpp). fp32 or bf16, on CPU and GPU ranks.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/ops.h"
#include "model/activations.h"
#include "model/context_split.h"
#include "model/model_config.h"
#include "model/param_access.h"
#include "model/param_layout.h"
#include "model/tp_comm.h"

namespace ft {

class Llama {
 public:
  // Every op of the model runs on ctx (the rank's context, made once by its owner).
  Llama(const ExecContext& ctx, const ModelConfig& cfg, const ParamLayout& layout, Precision precision,
        TpComm* tp = nullptr, ContextSplit* cp = nullptr);

  const ExecContext& context() const { return ctx_; }
  const ModelConfig& config() const { return cfg_; }
  Precision precision() const { return precision_; }
  int num_units() const { return static_cast<int>(cfg_.n_layers) + 2; }
  // Whether this model's layout holds global unit u (0 embedding, 1 + i layer i, L + 1 head).
  bool holds_unit(int u) const { return local_unit_[static_cast<size_t>(u)] >= 0; }
  // How tensor parallelism divides this rank's activations: allocate Activations with it.
  const TpSplit& tp_split() const { return tp_split_; }
  // Tokens of each sample this rank holds when samples have seq_len: all, or its share under
  // context parallelism (allocate the Activations for that many).
  int64_t local_seq_len(int64_t seq_len) const { return cp_ ? cp_->local_tokens() : seq_len; }

  // One micro-batch: forward, loss and backward. Parameter gradients accumulate (+=) the
  // gradient of grad_scale · (sum of token losses). The token losses are added, one by one in
  // token order, into *loss_sum: a double in ctx's device memory (DeviceScalars), read back by
  // the caller when it needs the value.
  void forward_backward(ParamAccess& params, Activations& acts, const int32_t* seqs, float grad_scale,
                        double* loss_sum);
  // Forward only; the token losses are added into *loss_sum likewise.
  void forward_loss(ParamAccess& params, Activations& acts, const int32_t* seqs, double* loss_sum);
  // Forward only; writes logits (B·T, V) of every position (tests, small-model generation).
  void forward_logits(ParamAccess& params, Activations& acts, const int32_t* seqs, float* logits);

  // The units one by one, for schedules that interleave them (pipeline parallelism).
  // Backward of a block takes the gradient w.r.t. its output in d_res and leaves there the
  // gradient w.r.t. its input; d_res is (Ns, C) like the residual stream (tp_split().tokens(N)).
  void load_batch(Activations& acts, const int32_t* seqs) const;
  // load_batch's check of B host sequences of T + 1 tokens (ft::Error naming the first token id
  // outside the vocabulary): for a caller that replays a captured load (train/step_graph.h).
  void check_tokens(const int32_t* seqs, int64_t B, int64_t T) const;
  void embed_forward(ParamAccess& params, Activations& acts);
  void block_forward(ParamAccess& params, Activations& acts, int64_t layer);
  // Final norm, LM head and loss in chunks of tokens; with backward, also the head's gradient
  // (into acts.dxf and the head's parameter gradients) so no full logits tensor ever exists. The
  // token losses are added into *loss_sum (device memory; ops::sum_in_order, chunk by chunk).
  void head_forward(ParamAccess& params, Activations& acts, float grad_scale, bool backward, double* loss_sum);
  void head_backward(ParamAccess& params, Activations& acts, float* d_res);
  void block_backward(ParamAccess& params, Activations& acts, int64_t layer, float* d_res);
  void embed_backward(ParamAccess& params, Activations& acts, const float* d_res);

  // Backward scratch for micro-batches of (B, T) (allocated on first use).
  BackwardScratch& scratch(int64_t B, int64_t T);

 private:
  struct BlockSpecs {
    const ParamSpec *attn_norm, *wqkv, *wo, *mlp_norm, *w13, *w2;
  };
  void block_forward_into(ParamAccess& params, Activations& acts, int64_t layer, BlockActivations& a);
  // Selective recompute: refills a's norm outputs and statistics (from the block input and x_mid)
  // and SwiGLU's output (from gu), as block_forward_into wrote them; no GEMM, no communication.
  void recompute_elementwise(ParamAccess& params, Activations& acts, int64_t layer, BlockActivations& a);
  // A GEMM operand: fp32, or already rounded to bf16 (exactly one is set).
  struct Operand {
    const float* f32 = nullptr;
    const uint16_t* bf16 = nullptr;
    Operand at(int64_t i) const { return {f32 ? f32 + i : nullptr, bf16 ? bf16 + i : nullptr}; }
  };
  static Operand operand(const Tensor& t);  // by the tensor's dtype
  // The n weights from p's (the GEMM's matrix: q_proj is followed by k_proj and v_proj, gate_proj
  // by up_proj) as a GEMM operand: fp32, or bf16 (the ParamAccess's copy, or rounded into w16_).
  Operand weight(ParamAccess& params, const ParamSpec& p, int64_t n);
  // x (n) as a GEMM operand: itself (fp32), or rounded once into scratch16 (bf16 compute).
  Operand rounded(const float* x, int64_t n, Tensor& scratch16) const;
  // C (M, N) = op(A) op(B) + beta C, both operands fp32 or both bf16.
  void matmul(float* C, Operand A, Operand B, int64_t M, int64_t N, int64_t K, bool ta, bool tb, float beta) const;
  // out (M, N) = op(A) op(B) in out's type: fp32, or bf16 rounded by the GEMM's epilogue (bf16
  // compute, for a consumer that rounds anyway: RoPE, SwiGLU, the bf16 attention's backward).
  void matmul_to(Tensor& out, Operand A, Operand W, int64_t M, int64_t N, int64_t K, bool ta, bool tb) const;
  // out (Ns, C) = residual + A · Wᵀ for a row-parallel projection (Wo, W2; A: (N, K)). bf16 on one
  // tensor-parallel rank: the add is the GEMM's epilogue (matmul_bf16_add); otherwise the GEMM's
  // partial sums, their reduction over the tensor-parallel ranks, then the add.
  void project_residual(float* out, const float* residual, Operand A, Operand W, int64_t K, Activations& acts);
  void check_precision(const Activations& acts) const;
  // Attention of block activations a from a.qkv (N, (H + 2 Hkv) D), the QKV GEMM's output: RoPE in
  // place, then attention writing a.lse and a.att. With bf16 activations (bf16 compute) q, k, v
  // are bf16 (rounded by the GEMM, rotated in fp32) and the bf16 attention (cuDNN SDPA on a GPU)
  // writes a bf16 a.att, the Wo GEMM's operand as it is.
  void attention_forward_into(BlockActivations& a, int64_t B, int64_t T) const;
  // Its backward from g.datt (the Wo GEMM's input gradient: fp32, or bf16 rounded by that GEMM):
  // d(qkv) as the QKV GEMMs' operand — bf16 in g.dy16, or fp32 in g.dqkv.
  Operand attention_backward_into(BlockActivations& a, BackwardScratch& g, int64_t B, int64_t T) const;
  // Tokens of the residual stream on this rank: N, or N / tp with sequence parallelism.
  int64_t local_tokens(const Activations& acts) const { return acts.B * acts.T / (sp_ ? tp_->size() : 1); }
  // The (N, C) input of a column-parallel matmul from this rank's (local_tokens, C) rows: the
  // rows themselves, or (sequence parallelism) their all-gather into the scratch full_in.
  Operand gather_tokens(Operand rows, Activations& acts);
  // The (N, C) gradient of a row-parallel matmul's output from this rank's rows (the backward of
  // reduce_tokens: the rows themselves, or their all-gather into full_in).
  const float* gather_grad(const float* d_rows, Activations& acts);
  // Where a row-parallel matmul writes its (N, C) partial sum before reduce_tokens.
  float* partial_out(float* out, Activations& acts);
  // Sums a row-parallel matmul's partial output over the group into out (local_tokens, C):
  // all-reduce in place, or (sequence parallelism) reduce-scatter from full_out.
  void reduce_tokens(float* out, Activations& acts);
  // Backward of a column-parallel matmul's input: d_in (local_tokens, C) from the partial
  // (N, C) gradient written at partial_out(d_in).
  void reduce_input_grad(float* d_in, Activations& acts);

  // Context parallelism (model/llama_cp.cpp): the rank's RoPE tables (its tokens' true positions,
  // in the order it holds them), its chunks of seqs (B, T + 1), and attention over the split.
  void use_context_split();
  void load_split_batch(Activations& acts, const int32_t* seqs) const;
  void split_attention_forward(BlockActivations& a, int64_t B, int64_t T) const;
  Operand split_attention_backward(BlockActivations& a, BackwardScratch& g, int64_t B, int64_t T) const;

  void check_whole_model() const;
  // The ParamAccess unit of global unit u (the layout may hold a subset of the units).
  int unit(int u) const { return local_unit_[static_cast<size_t>(u)]; }

  ExecContext ctx_;
  ModelConfig cfg_;
  Precision precision_;
  std::vector<int> local_unit_;  // per global unit: its unit in the layout, or -1
  TpComm* tp_;
  TpComm identity_tp_;
  ContextSplit* cp_ = nullptr;  // context parallelism (null: the whole sequence is here)
  bool sp_ = false;             // sequence parallelism (tp > 1)
  TpSplit tp_split_;            // how this rank's activations are divided
  const ParamSpec* embed_;      // null when the layout does not hold the unit
  const ParamSpec* final_norm_;
  const ParamSpec* head_;             // == embed_ when tied
  std::vector<BlockSpecs> blocks_;    // per global layer (null specs for layers not held)
  int64_t H_, Hkv_, D_, F_, V_, v0_;  // this rank's heads, kv heads, head dim, ffn, vocab rows
  Tensor rope_cos_, rope_sin_;        // (max_seq_len, D/2)
  BackwardScratch scratch_;
  int64_t scratch_tokens_ = -1;
  Tensor w16_;  // bf16 compute without a ParamAccess copy: the weight being used, rounded
};

}  // namespace ft

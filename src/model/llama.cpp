#include "model/llama.h"

#include "util/error.h"

namespace ft {
namespace {

// The ops that make a GEMM's input write fp32, or bf16 into a bf16 tensor (bf16 compute keeps
// those tensors in bf16).
void rmsnorm_into(const ExecContext& ctx, Tensor& out, float* rstd, const float* x, const float* weight, int64_t N,
                  int64_t C, float eps) {
  if (out.dtype() == DType::kBF16)
    ops::rmsnorm_forward_bf16(ctx, out.data<uint16_t>(), rstd, x, weight, N, C, eps);
  else
    ops::rmsnorm_forward(ctx, out.data<float>(), rstd, x, weight, N, C, eps);
}

// SwiGLU on tensors of one type: fp32, or bf16 (bf16 compute: the GEMMs write and read them).
void swiglu_into(const ExecContext& ctx, Tensor& out, const Tensor& gate_up, int64_t N, int64_t F) {
  if (out.dtype() == DType::kBF16)
    ops::swiglu_forward_bf16(ctx, out.data<uint16_t>(), gate_up.data<uint16_t>(), N, F);
  else
    ops::swiglu_forward(ctx, out.data<float>(), gate_up.data<float>(), N, F);
}

void swiglu_backward_into(const ExecContext& ctx, Tensor& dgate_up, const Tensor& dout, const Tensor& gate_up,
                          int64_t N, int64_t F) {
  if (dgate_up.dtype() == DType::kBF16)
    ops::swiglu_backward_bf16(ctx, dgate_up.data<uint16_t>(), dout.data<uint16_t>(), gate_up.data<uint16_t>(), N, F);
  else
    ops::swiglu_backward(ctx, dgate_up.data<float>(), dout.data<float>(), gate_up.data<float>(), N, F);
}

}  // namespace

Llama::Llama(const ExecContext& ctx, const ModelConfig& cfg, const ParamLayout& layout, Precision precision, TpComm* tp,
             ContextSplit* cp)
    : ctx_(ctx), cfg_(cfg), precision_(precision), tp_(tp ? tp : &identity_tp_), identity_tp_(ctx), cp_(cp) {
  auto find = [&](const std::string& name) { return layout.has(name) ? &layout.at(name) : nullptr; };
  for (int u = 0; u < num_units(); ++u) local_unit_.push_back(layout.local_unit(u));
  embed_ = find("model.embed_tokens.weight");
  final_norm_ = find("model.norm.weight");
  head_ = cfg.tie_embeddings ? embed_ : find("lm_head.weight");
  int64_t first = -1;  // the first layer held: local sizes come from its shapes
  for (int64_t i = 0; i < cfg.n_layers; ++i) {
    std::string pre = "model.layers." + std::to_string(i) + ".";
    blocks_.push_back({find(pre + "input_layernorm.weight"), find(pre + "self_attn.q_proj.weight"),
                       find(pre + "self_attn.o_proj.weight"), find(pre + "post_attention_layernorm.weight"),
                       find(pre + "mlp.gate_proj.weight"), find(pre + "mlp.down_proj.weight")});
    if (first < 0 && blocks_.back().wqkv) first = i;
  }
  FT_CHECK(!final_norm_ || head_, "the layout holds the final norm but no LM head (tied embeddings need unit 0)");
  // Local sizes come from the shapes this rank holds (tensor parallelism shards them).
  D_ = cfg.head_dim();
  const std::string pre = "model.layers." + std::to_string(first) + ".";
  H_ = first >= 0 ? blocks_[static_cast<size_t>(first)].wqkv->shape[0] / D_ : cfg.n_heads;
  Hkv_ = first >= 0 ? layout.at(pre + "self_attn.k_proj.weight").shape[0] / D_ : cfg.n_kv_heads;
  F_ = first >= 0 ? blocks_[static_cast<size_t>(first)].w2->shape[1] : cfg.ffn_dim;
  const ParamSpec* vocab = head_ ? head_ : embed_;
  V_ = vocab ? vocab->shape[0] : cfg.vocab_size;
  v0_ = vocab && vocab->split_dim == 0 ? vocab->split_offset : 0;
  sp_ = tp_->sequence_parallel() && tp_->size() > 1;
  tp_split_ = TpSplit{tp_->size(), sp_};
  int64_t half = D_ / 2;
  rope_cos_ = Tensor::empty({cfg.max_seq_len, half}, DType::kF32, MemCategory::kWorkspace, ctx.device);
  rope_sin_ = Tensor::empty({cfg.max_seq_len, half}, DType::kF32, MemCategory::kWorkspace, ctx.device);
  ops::rope_tables(ctx_, rope_cos_.data<float>(), rope_sin_.data<float>(), cfg.max_seq_len, D_,
                   static_cast<float>(cfg.rope_theta));
  if (cp_) use_context_split();
}

Llama::Operand Llama::operand(const Tensor& t) {
  if (t.dtype() == DType::kBF16) return {nullptr, t.data<uint16_t>()};
  return {t.data<float>(), nullptr};
}

Llama::Operand Llama::weight(ParamAccess& params, const ParamSpec& p, int64_t n) {
  if (precision_ != Precision::kBF16) return {params.weight(p), nullptr};
  if (const uint16_t* w = params.weight_bf16(p)) return {nullptr, w};
  if (w16_.numel() < n) w16_ = Tensor::empty({n}, DType::kBF16, MemCategory::kWorkspace, ctx_.device);
  ops::to_bf16(ctx_, w16_.data<uint16_t>(), params.weight(p), n);
  return {nullptr, w16_.data<uint16_t>()};
}

Llama::Operand Llama::rounded(const float* x, int64_t n, Tensor& scratch16) const {
  if (precision_ != Precision::kBF16) return {x, nullptr};
  ops::to_bf16(ctx_, scratch16.data<uint16_t>(), x, n);
  return {nullptr, scratch16.data<uint16_t>()};
}

void Llama::matmul(float* C, Operand A, Operand B, int64_t M, int64_t N, int64_t K, bool ta, bool tb,
                   float beta) const {
  if (A.bf16 && B.bf16) return ops::matmul_bf16(ctx_, C, A.bf16, B.bf16, M, N, K, ta, tb, beta);
  FT_CHECK(A.f32 && B.f32, "matmul M={} N={} K={} mixes an fp32 and a bf16 operand", M, N, K);
  ops::matmul(ctx_, C, A.f32, B.f32, M, N, K, ta, tb, beta, precision_);
}

void Llama::matmul_to(Tensor& out, Operand A, Operand B, int64_t M, int64_t N, int64_t K, bool ta, bool tb) const {
  if (out.dtype() != DType::kBF16) return matmul(out.data<float>(), A, B, M, N, K, ta, tb, 0);
  FT_CHECK(A.bf16 && B.bf16, "matmul M={} N={} K={} into bf16 needs bf16 operands", M, N, K);
  ops::matmul_bf16_rounded(ctx_, out.data<uint16_t>(), A.bf16, B.bf16, M, N, K, ta, tb);
}

void Llama::project_residual(float* out, const float* residual, Operand A, Operand W, int64_t K, Activations& acts) {
  const int64_t N = acts.B * acts.T, C = cfg_.dim;
  if (A.bf16 && W.bf16 && tp_->size() == 1)
    return ops::matmul_bf16_add(ctx_, out, residual, A.bf16, W.bf16, N, C, K, false, true);
  matmul(partial_out(out, acts), A, W, N, C, K, false, true, 0);
  reduce_tokens(out, acts);
  ops::add_inplace(ctx_, out, residual, local_tokens(acts) * C);
}

void Llama::check_precision(const Activations& acts) const {
  FT_CHECK(acts.precision == precision_, "activations allocated for {} compute, the model computes in {}",
           precision_label(acts.precision), precision_label(precision_));
}

BackwardScratch& Llama::scratch(int64_t B, int64_t T) {
  if (scratch_tokens_ != B * T) {
    if (sp_ && (B * T) % tp_->size() != 0) {
      throw Error(fmt::format("sequence parallelism splits the {} x {} = {} tokens of a micro-batch over {} "
                              "tensor-parallel ranks, which does not divide them",
                              B, T, B * T, tp_->size()),
                  "make train.micro_batch_size x train.seq_len a multiple of parallel.tp");
    }
    scratch_.allocate(cfg_, B, T, tp_split_, precision_, ctx_.device);
    scratch_tokens_ = B * T;
  }
  return scratch_;
}

// ---- tensor-parallel seams (identity on one rank) ----------------------------------------

Llama::Operand Llama::gather_tokens(Operand rows, Activations& acts) {
  if (!sp_) return rows;
  float* full = scratch(acts.B, acts.T).full_in.data<float>();
  const int64_t n = local_tokens(acts) * cfg_.dim;
  if (rows.f32) {
    tp_->gather_forward(full, rows.f32, n);
    return {full, nullptr};
  }
  // bf16 rows: the all-gather moves bytes, two bf16 per float slot (C = heads x an even head
  // dim, so n is even); full_in has room for twice as many.
  tp_->gather_forward(full, reinterpret_cast<const float*>(rows.bf16), n / 2);
  return {nullptr, reinterpret_cast<const uint16_t*>(full)};
}

const float* Llama::gather_grad(const float* d_rows, Activations& acts) {
  if (!sp_) return d_rows;
  float* full = scratch(acts.B, acts.T).full_in.data<float>();
  tp_->scatter_backward(full, d_rows, local_tokens(acts) * cfg_.dim);
  return full;
}

float* Llama::partial_out(float* out, Activations& acts) {
  return sp_ ? scratch(acts.B, acts.T).full_out.data<float>() : out;
}

void Llama::reduce_tokens(float* out, Activations& acts) {
  if (sp_)
    tp_->scatter_forward(out, scratch(acts.B, acts.T).full_out.data<float>(), local_tokens(acts) * cfg_.dim);
  else
    tp_->reduce_forward(out, acts.B * acts.T * cfg_.dim);
}

void Llama::reduce_input_grad(float* d_in, Activations& acts) {
  if (sp_)
    tp_->gather_backward(d_in, scratch(acts.B, acts.T).full_out.data<float>(), local_tokens(acts) * cfg_.dim);
  else
    tp_->copy_backward(d_in, acts.B * acts.T * cfg_.dim);
}

void Llama::check_tokens(const int32_t* seqs, int64_t B, int64_t T) const {
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      int32_t tok = seqs[b * (T + 1) + t];
      if (tok < 0 || tok >= cfg_.vocab_size) {
        throw Error(fmt::format("token id {} at sequence {}, position {} is outside the vocabulary [0, {})", tok, b, t,
                                cfg_.vocab_size),
                    "model.vocab_size must exceed every token id of the data");
      }
    }
  }
}

void Llama::load_batch(Activations& acts, const int32_t* seqs) const {
  if (cp_) return load_split_batch(acts, seqs);
  const int64_t B = acts.B, T = acts.T;
  // seqs is the loader's batch in host memory: checked there, then moved to the model's memory.
  check_tokens(seqs, B, T);
  // (B, T + 1) host rows -> tokens = columns [0, T), targets = columns [1, T + 1): one strided
  // host-to-device transfer each.
  const ExecContext& ctx = ctx_;
  const size_t row = static_cast<size_t>(T) * sizeof(int32_t), pitch = row + sizeof(int32_t);
  mem_copy_2d(ctx, acts.tokens.raw(), acts.tokens.device(), row, seqs, Device::kCPU, pitch, row,
              static_cast<size_t>(B));
  mem_copy_2d(ctx, acts.targets.raw(), acts.targets.device(), row, seqs + 1, Device::kCPU, pitch, row,
              static_cast<size_t>(B));
}

// ---- forward ------------------------------------------------------------------------------

void Llama::embed_forward(ParamAccess& params, Activations& acts) {
  params.before_forward(unit(0));
  const int64_t N = acts.B * acts.T, C = cfg_.dim;
  float* x = acts.res[0].data<float>();
  // Vocab-parallel: a token's row lives on one rank, the others contribute zeros.
  ops::embedding_forward(ctx_, partial_out(x, acts), acts.tokens.data<int32_t>(), params.weight(*embed_), N, C, v0_,
                         V_);
  reduce_tokens(x, acts);
  params.after_forward(unit(0));
}

void Llama::block_forward(ParamAccess& params, Activations& acts, int64_t layer) {
  const int u = unit(static_cast<int>(layer) + 1);
  params.before_forward(u);
  block_forward_into(params, acts, layer, acts.block(layer));
  params.after_forward(u);
}

void Llama::block_forward_into(ParamAccess& params, Activations& acts, int64_t layer, BlockActivations& a) {
  check_precision(acts);
  const BlockSpecs& s = blocks_[static_cast<size_t>(layer)];
  const int64_t B = acts.B, T = acts.T, N = B * T, Ns = local_tokens(acts), C = cfg_.dim, HD = H_ * D_,
                QKV = (H_ + 2 * Hkv_) * D_;
  const float eps = static_cast<float>(cfg_.norm_eps);
  const float* x = acts.input(layer).data<float>();  // (Ns, C) block input
  float* out = acts.output(layer).data<float>();     // (Ns, C) block output
  float* x_mid = a.x_mid.data<float>();

  // Attention: x_mid = x + Wo · attention(rope(Wqkv · norm(x)))
  rmsnorm_into(ctx_, a.xn1, a.rstd1.data<float>(), x, params.weight(*s.attn_norm), Ns, C, eps);
  matmul_to(a.qkv, gather_tokens(operand(a.xn1), acts), weight(params, *s.wqkv, QKV * C), N, QKV, C, false, true);
  attention_forward_into(a, B, T);
  project_residual(x_mid, x, operand(a.att), weight(params, *s.wo, C * HD), HD, acts);

  // MLP: out = x_mid + W2 · swiglu(W13 · norm(x_mid))
  rmsnorm_into(ctx_, a.xn2, a.rstd2.data<float>(), x_mid, params.weight(*s.mlp_norm), Ns, C, eps);
  matmul_to(a.gu, gather_tokens(operand(a.xn2), acts), weight(params, *s.w13, 2 * F_ * C), N, 2 * F_, C, false, true);
  swiglu_into(ctx_, a.h, a.gu, N, F_);
  project_residual(out, x_mid, operand(a.h), weight(params, *s.w2, C * F_), F_, acts);
}

void Llama::attention_forward_into(BlockActivations& a, int64_t B, int64_t T) const {
  if (cp_) return split_attention_forward(a, B, T);
  const float *cos = rope_cos_.data<float>(), *sin = rope_sin_.data<float>();
  if (a.qkv.dtype() == DType::kBF16) {
    uint16_t* qkv = a.qkv.data<uint16_t>();
    ops::rope_forward_bf16(ctx_, qkv, qkv, cos, sin, B, T, H_, Hkv_, D_, 0);
    ops::attention_forward_bf16(ctx_, a.att.data<uint16_t>(), a.lse.data<float>(), a.qkv.data<uint16_t>(), B, T, H_,
                                Hkv_, D_);
    return;
  }
  float* qkv = a.qkv.data<float>();
  ops::rope_forward(ctx_, qkv, cos, sin, B, T, H_, Hkv_, D_, 0);
  ops::attention_forward(ctx_, a.att.data<float>(), a.lse.data<float>(), qkv, B, T, H_, Hkv_, D_);
}

void Llama::head_forward(ParamAccess& params, Activations& acts, float grad_scale, bool backward, double* loss_sum) {
  check_precision(acts);
  const int head_unit = unit(static_cast<int>(cfg_.n_layers) + 1);
  params.before_forward(head_unit);
  if (cfg_.tie_embeddings) params.before_forward(unit(0));
  const int64_t N = acts.B * acts.T, C = cfg_.dim, V = V_;
  const float* x = acts.res.back().data<float>();
  rmsnorm_into(ctx_, acts.xf, acts.rstdf.data<float>(), x, params.weight(*final_norm_), local_tokens(acts), C,
               static_cast<float>(cfg_.norm_eps));
  const Operand xf = gather_tokens(operand(acts.xf), acts);  // (N, C)
  const Operand W = weight(params, *head_, V_ * C);          // (V, C): this rank's vocabulary rows [v0, v0 + V)
  float* dW = backward ? params.grad(*head_) : nullptr;
  float* logits = acts.logits.data<float>();
  float* lse = acts.lse.data<float>();
  float* losses = acts.losses.data<float>();
  int32_t* local_targets = acts.local_targets.data<int32_t>();
  for (int64_t n0 = 0; n0 < N; n0 += acts.chunk) {
    const int64_t n = std::min(acts.chunk, N - n0);
    // Targets of this rank's vocab rows [v0, v0 + V); others are "elsewhere" (>= V).
    ops::xent_shard_targets(ctx_, local_targets, acts.targets.data<int32_t>() + n0, n, v0_, V);
    matmul(logits, xf.at(n0 * C), W, n, V, C, false, true, 0);  // (n, V) = xf · Wᵀ
    ops::xent_forward(ctx_, losses + n0, lse, logits, local_targets, n, V);
    if (tp_->size() > 1) {  // vocab-parallel: combine the rows' statistics, never the logits
      float* zt = acts.target_logit.data<float>();
      ops::xent_target_logit(ctx_, zt, logits, local_targets, n, V);
      tp_->combine_xent_rows(lse, zt, n);
      ops::xent_loss_from_rows(ctx_, losses + n0, lse, zt, local_targets, n);
    }
    ops::sum_in_order(ctx_, loss_sum, losses + n0, n);
    if (!backward) continue;
    // dlogits: in place (fp32), or in bf16 for the two GEMMs (lse global)
    Operand dlogits{logits, nullptr};
    if (precision_ == Precision::kBF16) {
      ops::xent_backward_bf16(ctx_, acts.dlogits16.data<uint16_t>(), logits, lse, local_targets, n, V, grad_scale);
      dlogits = operand(acts.dlogits16);
    } else {
      ops::xent_backward(ctx_, logits, logits, lse, local_targets, n, V, grad_scale);
    }
    matmul(acts.dxf.data<float>() + n0 * C, dlogits, W, n, C, V, false, false, 0);  // (n, C) = dlogits · W
    matmul(dW, dlogits, xf.at(n0 * C), V, C, n, true, false, 1);                    // (V, C) += dlogitsᵀ · xf
  }
  if (cfg_.tie_embeddings) params.after_forward(unit(0));
  params.after_forward(head_unit);
}

// ---- backward -----------------------------------------------------------------------------

void Llama::head_backward(ParamAccess& params, Activations& acts, float* d_res) {
  const int head_unit = unit(static_cast<int>(cfg_.n_layers) + 1);
  params.before_backward(head_unit);
  const int64_t C = cfg_.dim;
  // dxf (N, C) is this rank's vocabulary's part of the gradient: sum it (onto the token shard).
  float* dxf = sp_ ? scratch(acts.B, acts.T).d_xn.data<float>() : acts.dxf.data<float>();
  if (sp_)
    tp_->gather_backward(dxf, acts.dxf.data<float>(), local_tokens(acts) * C);
  else
    tp_->copy_backward(dxf, acts.B * acts.T * C);
  ops::rmsnorm_backward(ctx_, d_res, params.grad(*final_norm_), dxf, nullptr, acts.res.back().data<float>(),
                        params.weight(*final_norm_), acts.rstdf.data<float>(), local_tokens(acts), C);
  params.after_backward(head_unit);
}

void Llama::block_backward(ParamAccess& params, Activations& acts, int64_t layer, float* d_res) {
  const int u = unit(static_cast<int>(layer) + 1);
  params.before_backward(u);
  BlockActivations& a = acts.block(layer);
  if (cfg_.recompute == Recompute::kFull) block_forward_into(params, acts, layer, a);
  if (cfg_.recompute == Recompute::kSelective) recompute_elementwise(params, acts, layer, a);
  const BlockSpecs& s = blocks_[static_cast<size_t>(layer)];
  const int64_t B = acts.B, T = acts.T, N = B * T, Ns = local_tokens(acts), C = cfg_.dim, HD = H_ * D_,
                QKV = (H_ + 2 * Hkv_) * D_;
  BackwardScratch& g = scratch(B, T);
  const float* x = acts.input(layer).data<float>();
  float* d_mid = g.d_mid.data<float>();  // (Ns, C)
  float* d_xn = g.d_xn.data<float>();    // (Ns, C)

  // MLP: d_res holds d(out). d_mid = d(x_mid) = d_res + norm2ᵀ(W13ᵀ · swigluᵀ(W2ᵀ · d_res))
  const Operand d_out = rounded(gather_grad(d_res, acts), N * C, g.dy16);         // (N, C)
  matmul_to(g.dh, d_out, weight(params, *s.w2, C * F_), N, F_, C, false, false);  // (N,F) = d·W2
  matmul(params.grad(*s.w2), d_out, operand(a.h), C, F_, N, true, false, 1);      // (C,F) += dᵀ·h
  swiglu_backward_into(ctx_, g.dgu, g.dh, a.gu, N, F_);
  matmul(partial_out(d_xn, acts), operand(g.dgu), weight(params, *s.w13, 2 * F_ * C), N, C, 2 * F_, false, false, 0);
  matmul(params.grad(*s.w13), operand(g.dgu), gather_tokens(operand(a.xn2), acts), 2 * F_, C, N, true, false, 1);
  reduce_input_grad(d_xn, acts);
  ops::rmsnorm_backward(ctx_, d_mid, params.grad(*s.mlp_norm), d_xn, d_res, a.x_mid.data<float>(),
                        params.weight(*s.mlp_norm), a.rstd2.data<float>(), Ns, C);

  // Attention: d_res = d(x) = d_mid + norm1ᵀ(Wqkvᵀ · ropeᵀ(attentionᵀ(Woᵀ · d_mid)))
  const Operand d_mid_full = rounded(gather_grad(d_mid, acts), N * C, g.dy16);  // (N, C)
  matmul_to(g.datt, d_mid_full, weight(params, *s.wo, C * HD), N, HD, C, false, false);
  matmul(params.grad(*s.wo), d_mid_full, operand(a.att), C, HD, N, true, false, 1);
  const Operand dqkv = attention_backward_into(a, g, B, T);
  matmul(partial_out(d_xn, acts), dqkv, weight(params, *s.wqkv, QKV * C), N, C, QKV, false, false, 0);
  matmul(params.grad(*s.wqkv), dqkv, gather_tokens(operand(a.xn1), acts), QKV, C, N, true, false, 1);
  reduce_input_grad(d_xn, acts);
  ops::rmsnorm_backward(ctx_, d_res, params.grad(*s.attn_norm), d_xn, d_mid, x, params.weight(*s.attn_norm),
                        a.rstd1.data<float>(), Ns, C);
  params.after_backward(u);
}

void Llama::recompute_elementwise(ParamAccess& params, Activations& acts, int64_t layer, BlockActivations& a) {
  // The forward's own calls on the same inputs: bit-identical buffers.
  const BlockSpecs& s = blocks_[static_cast<size_t>(layer)];
  const int64_t N = acts.B * acts.T, Ns = local_tokens(acts), C = cfg_.dim;
  const float eps = static_cast<float>(cfg_.norm_eps);
  rmsnorm_into(ctx_, a.xn1, a.rstd1.data<float>(), acts.input(layer).data<float>(), params.weight(*s.attn_norm), Ns, C,
               eps);
  rmsnorm_into(ctx_, a.xn2, a.rstd2.data<float>(), a.x_mid.data<float>(), params.weight(*s.mlp_norm), Ns, C, eps);
  swiglu_into(ctx_, a.h, a.gu, N, F_);
}

Llama::Operand Llama::attention_backward_into(BlockActivations& a, BackwardScratch& g, int64_t B, int64_t T) const {
  if (cp_) return split_attention_backward(a, g, B, T);
  const float *cos = rope_cos_.data<float>(), *sin = rope_sin_.data<float>();
  if (a.qkv.dtype() == DType::kBF16) {
    // d(qkv) into dy16, whose d(x_mid) the Wo GEMMs have read already.
    uint16_t* dqkv = g.dy16.data<uint16_t>();
    ops::attention_backward_bf16(ctx_, dqkv, g.datt.data<uint16_t>(), a.qkv.data<uint16_t>(), a.att.data<uint16_t>(),
                                 a.lse.data<float>(), B, T, H_, Hkv_, D_);
    ops::rope_backward_bf16(ctx_, dqkv, dqkv, cos, sin, B, T, H_, Hkv_, D_, 0);
    return {nullptr, dqkv};
  }
  float* dqkv = g.dqkv.data<float>();
  ops::attention_backward(ctx_, dqkv, g.datt.data<float>(), a.qkv.data<float>(), a.att.data<float>(),
                          a.lse.data<float>(), B, T, H_, Hkv_, D_);
  ops::rope_backward(ctx_, dqkv, cos, sin, B, T, H_, Hkv_, D_, 0);
  return {dqkv, nullptr};
}

void Llama::embed_backward(ParamAccess& params, Activations& acts, const float* d_res) {
  params.before_backward(unit(0));
  const int64_t N = acts.B * acts.T;
  ops::embedding_backward(ctx_, params.grad(*embed_), gather_grad(d_res, acts), acts.tokens.data<int32_t>(), N,
                          cfg_.dim, v0_, V_);
  params.after_backward(unit(0));
}

// ---- whole passes -------------------------------------------------------------------------

void Llama::check_whole_model() const {
  for (int u = 0; u < num_units(); ++u)
    FT_CHECK(holds_unit(u), "a whole-model pass on a model that holds a pipeline stage's units only (unit {})", u);
}

void Llama::forward_backward(ParamAccess& params, Activations& acts, const int32_t* seqs, float grad_scale,
                             double* loss_sum) {
  check_whole_model();
  load_batch(acts, seqs);
  embed_forward(params, acts);
  for (int64_t i = 0; i < cfg_.n_layers; ++i) block_forward(params, acts, i);
  head_forward(params, acts, grad_scale, /*backward=*/true, loss_sum);
  float* d_res = scratch(acts.B, acts.T).d_res.data<float>();
  head_backward(params, acts, d_res);
  for (int64_t i = cfg_.n_layers - 1; i >= 0; --i) block_backward(params, acts, i, d_res);
  embed_backward(params, acts, d_res);
}

void Llama::forward_loss(ParamAccess& params, Activations& acts, const int32_t* seqs, double* loss_sum) {
  check_whole_model();
  load_batch(acts, seqs);
  embed_forward(params, acts);
  for (int64_t i = 0; i < cfg_.n_layers; ++i) block_forward(params, acts, i);
  head_forward(params, acts, 0.0f, /*backward=*/false, loss_sum);
}

void Llama::forward_logits(ParamAccess& params, Activations& acts, const int32_t* seqs, float* logits) {
  FT_CHECK(tp_->size() == 1, "forward_logits gathers no vocab shards");
  FT_CHECK(!cp_, "forward_logits gathers no context-parallel chunks");
  check_whole_model();
  load_batch(acts, seqs);
  embed_forward(params, acts);
  for (int64_t i = 0; i < cfg_.n_layers; ++i) block_forward(params, acts, i);
  const int64_t N = acts.B * acts.T, C = cfg_.dim;
  rmsnorm_into(ctx_, acts.xf, acts.rstdf.data<float>(), acts.res.back().data<float>(), params.weight(*final_norm_), N,
               C, static_cast<float>(cfg_.norm_eps));
  matmul(logits, operand(acts.xf), weight(params, *head_, V_ * C), N, V_, C, false, true, 0);
}

}  // namespace ft

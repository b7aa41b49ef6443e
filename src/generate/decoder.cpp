#include "generate/decoder.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/ops.h"
#include "util/error.h"
#include "util/hash.h"

namespace ft {

Decoder::Decoder(const ExecContext& ctx, const ModelConfig& cfg, const ParamLayout& layout, const float* w,
                 int64_t max_positions)
    : ctx_(ctx), cfg_(cfg), max_pos_(std::min(max_positions, cfg.max_seq_len)) {
  C_ = cfg.dim, D_ = cfg.head_dim(), H_ = cfg.n_heads, Hkv_ = cfg.n_kv_heads, F_ = cfg.ffn_dim, V_ = cfg.vocab_size;
  FT_CHECK(layout.num_units() == cfg.n_layers + 2, "the decoder needs the whole model's layout");
  auto at = [&](const std::string& n) { return w + layout.at(n).offset; };
  embed_ = at("model.embed_tokens.weight");
  final_norm_ = at("model.norm.weight");
  head_ = cfg.tie_embeddings ? embed_ : at("lm_head.weight");
  for (int64_t i = 0; i < cfg.n_layers; ++i) {
    std::string p = "model.layers." + std::to_string(i) + ".";
    Layer l{at(p + "input_layernorm.weight"),
            at(p + "self_attn.q_proj.weight"),
            at(p + "self_attn.o_proj.weight"),
            at(p + "post_attention_layernorm.weight"),
            at(p + "mlp.gate_proj.weight"),
            at(p + "mlp.down_proj.weight"),
            Tensor::zeros({Hkv_, max_pos_, D_}, DType::kF32, MemCategory::kActivations, ctx.device),
            Tensor::zeros({Hkv_, max_pos_, D_}, DType::kF32, MemCategory::kActivations, ctx.device)};
    layers_.push_back(std::move(l));
  }
  cos_ = Tensor::empty({max_pos_, D_ / 2}, DType::kF32, MemCategory::kWorkspace, ctx.device);
  sin_ = Tensor::empty({max_pos_, D_ / 2}, DType::kF32, MemCategory::kWorkspace, ctx.device);
  ops::rope_tables(ctx_, cos_.data<float>(), sin_.data<float>(), max_pos_, D_, static_cast<float>(cfg.rope_theta));
}

const std::vector<float>& Decoder::feed(const std::vector<int32_t>& tokens) {
  const int64_t T = static_cast<int64_t>(tokens.size());
  if (T == 0) return logits_;
  if (pos_ + T > max_pos_)
    throw Error(fmt::format("generation: {} positions exceed the limit of {} (model.max_seq_len or --max-tokens)",
                            pos_ + T, max_pos_),
                "shorten the prompt or ask for fewer new tokens");
  for (int32_t t : tokens)
    if (t < 0 || t >= V_) throw Error(fmt::format("generation: token id {} is outside the vocabulary [0, {})", t, V_));
  const int64_t QKV = (H_ + 2 * Hkv_) * D_;
  const float eps = static_cast<float>(cfg_.norm_eps);
  const ExecContext& ctx = ctx_;
  // This feed's buffers on the model's device (grown to the longest feed so far).
  Buffers& b = buffers(T);
  float *x = b.x.data<float>(), *h = b.h.data<float>(), *rstd = b.rstd.data<float>(), *qkv = b.qkv.data<float>(),
        *att = b.att.data<float>(), *gu = b.gu.data<float>(), *a = b.a.data<float>();
  int32_t* ids = b.tokens.data<int32_t>();
  mem_copy(ctx, ids, b.tokens.device(), tokens.data(), Device::kCPU, static_cast<size_t>(T) * sizeof(int32_t));
  ops::embedding_forward(ctx_, x, ids, embed_, T, C_, 0, V_);
  for (Layer& l : layers_) {
    ops::rmsnorm_forward(ctx_, h, rstd, x, l.attn_norm, T, C_, eps);
    ops::matmul(ctx_, qkv, h, l.wqkv, T, QKV, C_, false, true, 0, Precision::kF32);
    ops::rope_forward(ctx_, qkv, cos_.data<float>(), sin_.data<float>(), 1, T, H_, Hkv_, D_, pos_);
    ops::kv_cache_write(ctx_, l.k_cache.data<float>(), l.v_cache.data<float>(), qkv, 1, T, H_, Hkv_, D_, pos_,
                        max_pos_);
    ops::attention_decode(ctx_, att, qkv, l.k_cache.data<float>(), l.v_cache.data<float>(), 1, T, pos_ + T, H_, Hkv_,
                          D_, max_pos_);
    ops::matmul(ctx_, x, att, l.wo, T, C_, H_ * D_, false, true, 1, Precision::kF32);  // x += att · Woᵀ
    ops::rmsnorm_forward(ctx_, h, rstd, x, l.mlp_norm, T, C_, eps);
    ops::matmul(ctx_, gu, h, l.w13, T, 2 * F_, C_, false, true, 0, Precision::kF32);
    ops::swiglu_forward(ctx_, a, gu, T, F_);
    ops::matmul(ctx_, x, a, l.w2, T, C_, F_, false, true, 1, Precision::kF32);  // x += W2 · swiglu
  }
  pos_ += T;
  const int64_t rows = keep_all_ ? T : 1;
  ops::rmsnorm_forward(ctx_, h, rstd, x + (T - rows) * C_, final_norm_, rows, C_, eps);
  float* out = b.logits.data<float>();
  ops::matmul(ctx_, out, h, head_, rows, V_, C_, false, true, 0, Precision::kF32);
  // The logits go back to the host for sampling: one read-back per feed.
  logits_.resize(static_cast<size_t>(V_));
  mem_copy(ctx, logits_.data(), Device::kCPU, out + (rows - 1) * V_, b.logits.device(),
           static_cast<size_t>(V_) * sizeof(float));
  if (keep_all_) {
    all_logits_.resize(static_cast<size_t>(rows * V_));
    mem_copy(ctx, all_logits_.data(), Device::kCPU, out, b.logits.device(),
             static_cast<size_t>(rows * V_) * sizeof(float));
  }
  return logits_;
}

Decoder::Buffers& Decoder::buffers(int64_t T) {
  if (T <= buffers_.tokens_capacity) return buffers_;
  const int64_t QKV = (H_ + 2 * Hkv_) * D_;
  auto make = [&](Shape s, DType t = DType::kF32) {
    return Tensor::empty(std::move(s), t, MemCategory::kActivations, ctx_.device);
  };
  buffers_ = Buffers{make({T}, DType::kI32), make({T, C_}),     make({T, C_}), make({T}),     make({T, QKV}),
                     make({T, H_ * D_}),     make({T, 2 * F_}), make({T, F_}), make({T, V_}), T};
  return buffers_;
}

int32_t sample_token(const std::vector<float>& logits, const SampleOptions& o, uint64_t index) {
  const size_t V = logits.size();
  if (o.temperature <= 0) return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  float mx = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(V);
  double sum = 0;
  for (size_t i = 0; i < V; ++i) sum += p[i] = std::exp((logits[i] - mx) / o.temperature);
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return p[static_cast<size_t>(a)] > p[static_cast<size_t>(b)]; });
  // The nucleus: the most probable tokens until their mass reaches top_p.
  size_t keep = 0;
  double mass = 0;
  while (keep < V && (keep == 0 || mass < o.top_p * sum)) mass += p[static_cast<size_t>(order[keep++])];
  double u = unit_open(mix64(o.seed ^ mix64(index + 0x51ed27ull))) * mass;
  for (size_t i = 0; i < keep; ++i) {
    u -= p[static_cast<size_t>(order[i])];
    if (u <= 0) return order[i];
  }
  return order[keep - 1];
}

}  // namespace ft

// Llama under context parallelism (model/context_split.h): what changes when this rank holds the
// zig-zag chunks of each sample rather than the whole sequence. Only three things do — which
// tokens are loaded, the positions RoPE rotates them by, and attention, which needs every rank's
// keys and values. Norms, projections, the MLP and the loss are per token. On CPU and GPU ranks
// alike, in fp32 and bf16: the split's attention runs through the op table (attention_block_*,
// attention_*) and the Communicator on ctx's device buffers.
#include "model/llama.h"
#include "util/error.h"

namespace ft {

void Llama::use_context_split() {
  if (precision_ != Precision::kF32 && precision_ != Precision::kBF16)
    throw Error(fmt::format("parallel.cp = {} needs train.precision = \"fp32\" or \"bf16\" (it is {})", cp_->size(),
                            precision_label(precision_)),
                "set train.precision = \"bf16\" or \"fp32\", or parallel.cp = 1");
  if (cp_->seq_len() > cfg_.max_seq_len)
    throw Error(fmt::format("train.seq_len = {} exceeds model.max_seq_len = {}", cp_->seq_len(), cfg_.max_seq_len),
                "raise model.max_seq_len or shorten the sequences");
  cp_->use_heads(H_, Hkv_);
  // The rows of the tables at this rank's positions: RoPE then runs at pos0 = 0 over its T / cp
  // tokens as over a contiguous sequence.
  const int64_t half = D_ / 2, T = cp_->local_tokens();
  Tensor cos = Tensor::empty({T, half}, DType::kF32, MemCategory::kWorkspace, ctx_.device);
  Tensor sin = Tensor::empty({T, half}, DType::kF32, MemCategory::kWorkspace, ctx_.device);
  const std::vector<int64_t> pos = cp_->positions();
  const size_t row = static_cast<size_t>(half) * sizeof(float);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t p = pos[static_cast<size_t>(t)];
    mem_copy(ctx_, cos.data<float>() + t * half, ctx_.device, rope_cos_.data<float>() + p * half, ctx_.device, row);
    mem_copy(ctx_, sin.data<float>() + t * half, ctx_.device, rope_sin_.data<float>() + p * half, ctx_.device, row);
  }
  rope_cos_ = std::move(cos);
  rope_sin_ = std::move(sin);
}

void Llama::load_split_batch(Activations& acts, const int32_t* seqs) const {
  const int64_t B = acts.B, T = cp_->seq_len();
  FT_CHECK(acts.T == cp_->local_tokens(), "activations for {} tokens, but this cp rank holds {} of {}", acts.T,
           cp_->local_tokens(), T);
  check_tokens(seqs, B, T);
  // Each chunk [b, e) of every sequence: tokens = columns [b, e), targets = columns [b + 1, e + 1)
  // of the (B, T + 1) rows, into columns [at, at + e - b) of the (B, T / cp) inputs.
  const size_t pitch = static_cast<size_t>(T + 1) * sizeof(int32_t), local = static_cast<size_t>(acts.T) * 4;
  int64_t at = 0;
  for (auto [b, e] : cp_->ranges()) {
    const size_t row = static_cast<size_t>(e - b) * sizeof(int32_t);
    mem_copy_2d(ctx_, acts.tokens.data<int32_t>() + at, acts.tokens.device(), local, seqs + b, Device::kCPU, pitch, row,
                static_cast<size_t>(B));
    mem_copy_2d(ctx_, acts.targets.data<int32_t>() + at, acts.targets.device(), local, seqs + b + 1, Device::kCPU,
                pitch, row, static_cast<size_t>(B));
    at += e - b;
  }
}

// In bf16 as the unsplit bf16 path (llama.cpp, attention_forward_into / attention_backward_into):
// RoPE in bf16, the split's bf16 attention, dqkv bf16 into dy16.
void Llama::split_attention_forward(BlockActivations& a, int64_t B, int64_t T) const {
  FT_CHECK(T == cp_->local_tokens(), "attention over {} tokens, but this cp rank holds {}", T, cp_->local_tokens());
  const float *cos = rope_cos_.data<float>(), *sin = rope_sin_.data<float>();
  if (a.qkv.dtype() == DType::kBF16) {
    uint16_t* qkv = a.qkv.data<uint16_t>();
    ops::rope_forward_bf16(ctx_, qkv, qkv, cos, sin, B, T, H_, Hkv_, D_, 0);
    cp_->attention_forward_bf16(a.att.data<uint16_t>(), a.lse.data<float>(), qkv, B, H_, Hkv_, D_);
    return;
  }
  float* qkv = a.qkv.data<float>();
  ops::rope_forward(ctx_, qkv, cos, sin, B, T, H_, Hkv_, D_, 0);
  cp_->attention_forward(a.att.data<float>(), a.lse.data<float>(), qkv, B, H_, Hkv_, D_);
}

Llama::Operand Llama::split_attention_backward(BlockActivations& a, BackwardScratch& g, int64_t B, int64_t T) const {
  if (a.qkv.dtype() == DType::kBF16) {
    uint16_t* dqkv = g.dy16.data<uint16_t>();  // as the unsplit path: d(x_mid) has been read from it
    cp_->attention_backward_bf16(dqkv, g.datt.data<uint16_t>(), a.qkv.data<uint16_t>(), a.att.data<uint16_t>(),
                                 a.lse.data<float>(), B, H_, Hkv_, D_);
    ops::rope_backward_bf16(ctx_, dqkv, dqkv, rope_cos_.data<float>(), rope_sin_.data<float>(), B, T, H_, Hkv_, D_, 0);
    return {nullptr, dqkv};
  }
  float* dqkv = g.dqkv.data<float>();
  cp_->attention_backward(dqkv, g.datt.data<float>(), a.qkv.data<float>(), a.att.data<float>(), a.lse.data<float>(), B,
                          H_, Hkv_, D_);
  ops::rope_backward(ctx_, dqkv, rope_cos_.data<float>(), rope_sin_.data<float>(), B, T, H_, Hkv_, D_, 0);
  return {dqkv, nullptr};
}

}  // namespace ft

#include "model/activations.h"

namespace ft {
namespace {

Tensor make(const std::string& name, const Shape& shape, Precision precision, Device dev) {
  return Tensor::empty(shape, activation_dtype(name, precision), MemCategory::kActivations, dev);
}

// The member of b that holds the block buffer `name` (BlockActivations, const or not).
template <class Block>
auto block_member(Block& b, const std::string& name) -> decltype(&b.xn1) {
  const std::pair<const char*, decltype(&b.xn1)> members[] = {
      {"xn1", &b.xn1},     {"rstd1", &b.rstd1}, {"qkv", &b.qkv},     {"att", &b.att}, {"lse", &b.lse},
      {"x_mid", &b.x_mid}, {"xn2", &b.xn2},     {"rstd2", &b.rstd2}, {"gu", &b.gu},   {"h", &b.h}};
  for (auto& [n, t] : members)
    if (name == n) return t;
  return nullptr;
}

}  // namespace

void BlockActivations::allocate(const ModelConfig& m, int64_t B, int64_t T, const TpSplit& tp, Precision precision,
                                Device dev, const BlockActivations* shared) {
  for (auto& [name, shape] : block_activation_shapes(m, B, T, tp)) {
    Tensor* t = block_member(*this, name);
    if (shared && recomputed_in_backward(name, m.recompute))
      *t = *block_member(*shared, name);
    else
      *t = make(name, shape, precision, dev);
  }
}

void BackwardScratch::allocate(const ModelConfig& m, int64_t B, int64_t T, const TpSplit& tp, Precision precision,
                               Device dev) {
  *this = BackwardScratch();
  const std::pair<const char*, Tensor*> members[] = {
      {"d_res", &d_res}, {"d_mid", &d_mid},     {"d_xn", &d_xn},         {"dh", &dh},    {"dgu", &dgu}, {"datt", &datt},
      {"dqkv", &dqkv},   {"full_in", &full_in}, {"full_out", &full_out}, {"dy16", &dy16}};
  for (auto& [name, shape] : backward_scratch_shapes(m, B, T, tp, precision))
    for (auto& [n, member] : members)
      if (name == n) *member = make(name, shape, precision, dev);
}

void Activations::allocate(const ModelConfig& m, int64_t B_, int64_t T_, int64_t chunk_tokens, LayerSpan span,
                           const TpSplit& tp, Precision prec, Device dev) {
  B = B_;
  T = T_;
  chunk = chunk_tokens;
  precision = prec;
  first_layer = span.first;
  res.clear();
  blocks.clear();
  target_logit = dlogits16 = Tensor();
  for (auto& [name, shape] : model_activation_shapes(m, B, T, chunk, span, tp, prec)) {
    Tensor t = make(name, shape, prec, dev);
    if (name.rfind("res", 0) == 0)
      res.push_back(t);
    else if (name == "xf")
      xf = t;
    else if (name == "rstdf")
      rstdf = t;
    else if (name == "dxf")
      dxf = t;
    else if (name == "losses")
      losses = t;
    else if (name == "logits")
      logits = t;
    else if (name == "lse")
      lse = t;
    else if (name == "target_logit")
      target_logit = t;
    else if (name == "dlogits16")
      dlogits16 = t;
  }
  // Full recompute: one set refilled for every block. Selective: a set per block whose recomputed
  // buffers (norms, SwiGLU output) are the first block's.
  blocks.resize(m.recompute == Recompute::kFull ? 1 : static_cast<size_t>(span.layers(m)));
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i].allocate(m, B, T, tp, prec, dev, i > 0 ? &blocks[0] : nullptr);
  // The micro-batch's input (Llama::load_batch): workspace, not what the layers keep. Every set
  // has room for it: a pipeline stage's chunks of one shape share their sets.
  tokens = Tensor::empty({B * T}, DType::kI32, MemCategory::kWorkspace, dev);
  targets = Tensor::empty({B * T}, DType::kI32, MemCategory::kWorkspace, dev);
  local_targets = Tensor::empty({chunk}, DType::kI32, MemCategory::kWorkspace, dev);
}

}  // namespace ft

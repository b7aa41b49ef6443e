#include "model/activations.h"

namespace ft {
namespace {

// Allocates each named shape into the member of the same name, in order.
void allocate_all(const NamedShapes& shapes, std::initializer_list<Tensor*> members) {
  auto it = members.begin();
  for (auto& [name, shape] : shapes) {
    if (it == members.end()) break;
    **it = Tensor::empty(shape, DType::kF32, MemCategory::kActivations);
    ++it;
  }
}

}  // namespace

void BlockActivations::allocate(const ModelConfig& m, int64_t B, int64_t T, const TpSplit& tp) {
  allocate_all(block_activation_shapes(m, B, T, tp), {&xn1, &rstd1, &qkv, &att, &lse, &x_mid, &xn2, &rstd2, &gu, &h});
}

void BackwardScratch::allocate(const ModelConfig& m, int64_t B, int64_t T, const TpSplit& tp) {
  full_in = full_out = Tensor();
  allocate_all(backward_scratch_shapes(m, B, T, tp), {&d_res, &d_mid, &d_xn, &dh, &dgu, &datt, &dqkv, &full_in, &full_out});
}

void Activations::allocate(const ModelConfig& m, int64_t B_, int64_t T_, int64_t chunk_tokens, LayerSpan span,
                           const TpSplit& tp) {
  B = B_;
  T = T_;
  chunk = chunk_tokens;
  first_layer = span.first;
  res.clear();
  blocks.clear();
  target_logit = Tensor();
  for (auto& [name, shape] : model_activation_shapes(m, B, T, chunk, span, tp)) {
    Tensor t = Tensor::empty(shape, DType::kF32, MemCategory::kActivations);
    if (name.rfind("res", 0) == 0) res.push_back(t);
    else if (name == "xf") xf = t;
    else if (name == "rstdf") rstdf = t;
    else if (name == "dxf") dxf = t;
    else if (name == "losses") losses = t;
    else if (name == "logits") logits = t;
    else if (name == "lse") lse = t;
    else if (name == "target_logit") target_logit = t;
  }
  blocks.resize(m.recompute == Recompute::kFull ? 1 : static_cast<size_t>(span.layers(m)));
  for (auto& b : blocks) b.allocate(m, B, T, tp);
  tokens.assign(static_cast<size_t>(B * T), 0);
  targets.assign(static_cast<size_t>(B * T), 0);
}

}  // namespace ft

#include "model/activations.h"

#include "model/activation_sizes.h"

namespace ft {
namespace {

// Allocates each named shape into the member of the same name, in order.
void allocate_all(const NamedShapes& shapes, std::initializer_list<Tensor*> members) {
  auto it = members.begin();
  for (auto& [name, shape] : shapes) {
    **it = Tensor::empty(shape, DType::kF32, MemCategory::kActivations);
    ++it;
  }
}

}  // namespace

void BlockActivations::allocate(const ModelConfig& m, int64_t B, int64_t T) {
  allocate_all(block_activation_shapes(m, B, T), {&xn1, &rstd1, &qkv, &att, &lse, &x_mid, &xn2, &rstd2, &gu, &h});
}

void BackwardScratch::allocate(const ModelConfig& m, int64_t B, int64_t T) {
  allocate_all(backward_scratch_shapes(m, B, T), {&d_res, &d_mid, &d_xn, &dh, &dgu, &datt, &dqkv});
}

void Activations::allocate(const ModelConfig& m, int64_t B_, int64_t T_, int64_t chunk_tokens) {
  B = B_;
  T = T_;
  chunk = chunk_tokens;
  res.clear();
  blocks.clear();
  for (auto& [name, shape] : model_activation_shapes(m, B, T, chunk)) {
    Tensor t = Tensor::empty(shape, DType::kF32, MemCategory::kActivations);
    if (name.rfind("res", 0) == 0) res.push_back(t);
    else if (name == "xf") xf = t;
    else if (name == "rstdf") rstdf = t;
    else if (name == "dxf") dxf = t;
    else if (name == "losses") losses = t;
    else if (name == "logits") logits = t;
    else if (name == "lse") lse = t;
  }
  blocks.resize(m.recompute == Recompute::kFull ? 1 : static_cast<size_t>(m.n_layers));
  for (auto& b : blocks) b.allocate(m, B, T);
  tokens.assign(static_cast<size_t>(B * T), 0);
  targets.assign(static_cast<size_t>(B * T), 0);
}

}  // namespace ft

#include "model/activations.h"

namespace ft {
namespace {

Tensor make(const std::string& name, const Shape& shape, Precision precision, Device dev) {
  return Tensor::empty(shape, activation_dtype(name, precision), MemCategory::kActivations, dev);
}

// Allocates each named shape into the member of the same name, in order.
void allocate_all(const NamedShapes& shapes, std::initializer_list<Tensor*> members, Precision precision, Device dev) {
  auto it = members.begin();
  for (auto& [name, shape] : shapes) {
    if (it == members.end()) break;
    **it = make(name, shape, precision, dev);
    ++it;
  }
}

}  // namespace

void BlockActivations::allocate(const ModelConfig& m, int64_t B, int64_t T, const TpSplit& tp, Precision precision,
                                Device dev) {
  allocate_all(block_activation_shapes(m, B, T, tp), {&xn1, &rstd1, &qkv, &att, &lse, &x_mid, &xn2, &rstd2, &gu, &h},
               precision, dev);
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
  blocks.resize(m.recompute == Recompute::kFull ? 1 : static_cast<size_t>(span.layers(m)));
  for (auto& b : blocks) b.allocate(m, B, T, tp, prec, dev);
  // The micro-batch's input (Llama::load_batch): workspace, not what the layers keep. Every set
  // has room for it: a pipeline stage's chunks of one shape share their sets.
  tokens = Tensor::empty({B * T}, DType::kI32, MemCategory::kWorkspace, dev);
  targets = Tensor::empty({B * T}, DType::kI32, MemCategory::kWorkspace, dev);
  local_targets = Tensor::empty({chunk}, DType::kI32, MemCategory::kWorkspace, dev);
}

}  // namespace ft

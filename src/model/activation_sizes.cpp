#include "model/activation_sizes.h"

#include <algorithm>

#include "util/saturating.h"

namespace ft {
namespace {

// One tensor-parallel rank's sizes (ParamLayout::llama splits the parameters the same way).
struct Local {
  int64_t N, Ns, C, H, Hkv, D, F, V;
  Local(const ModelConfig& m, int64_t B, int64_t T, const TpSplit& tp)
      : N(B * T),
        Ns(tp.tokens(B * T)),
        C(m.dim),
        H(m.n_heads / tp.size),
        Hkv(m.n_kv_heads % tp.size == 0 ? m.n_kv_heads / tp.size : 1),
        D(m.head_dim()),
        F(m.ffn_dim / tp.size),
        V(m.vocab_size / tp.size) {}
  int64_t qkv() const { return (H + 2 * Hkv) * D; }
};

}  // namespace

NamedShapes block_activation_shapes(const ModelConfig& m, int64_t B, int64_t T, const TpSplit& tp) {
  const Local l(m, B, T, tp);
  return {{"xn1", {l.Ns, l.C}},   {"rstd1", {l.Ns}},      {"qkv", {l.N, l.qkv()}}, {"att", {l.N, l.H * l.D}},
          {"lse", {B, l.H, T}},   {"x_mid", {l.Ns, l.C}}, {"xn2", {l.Ns, l.C}},    {"rstd2", {l.Ns}},
          {"gu", {l.N, 2 * l.F}}, {"h", {l.N, l.F}}};
}

NamedShapes backward_scratch_shapes(const ModelConfig& m, int64_t B, int64_t T, const TpSplit& tp,
                                    Precision precision) {
  const Local l(m, B, T, tp);
  NamedShapes s = {{"d_res", {l.Ns, l.C}}, {"d_mid", {l.Ns, l.C}},  {"d_xn", {l.Ns, l.C}},
                   {"dh", {l.N, l.F}},     {"dgu", {l.N, 2 * l.F}}, {"datt", {l.N, l.H * l.D}}};
  if (precision != Precision::kBF16) s.push_back({"dqkv", {l.N, l.qkv()}});
  if (tp.sequence_parallel && tp.size > 1) {
    s.push_back({"full_in", {l.N, l.C}});   // all-gathered input of a column-parallel matmul
    s.push_back({"full_out", {l.N, l.C}});  // partial output of a row-parallel matmul
  }
  // bf16: d(out), d(x_mid) rounded once for their two GEMMs, then the bf16 attention's d(qkv)
  if (precision == Precision::kBF16) s.push_back({"dy16", {l.N, std::max(l.C, l.qkv())}});
  return s;
}

NamedShapes model_activation_shapes(const ModelConfig& m, int64_t B, int64_t T, int64_t chunk, LayerSpan span,
                                    const TpSplit& tp, Precision precision) {
  const Local l(m, B, T, tp);
  NamedShapes s;
  for (int64_t i = 0; i <= span.layers(m); ++i) s.push_back({"res" + std::to_string(span.first + i), {l.Ns, l.C}});
  if (!span.head) return s;
  s.push_back({"xf", {l.Ns, l.C}});
  s.push_back({"rstdf", {l.Ns}});
  s.push_back({"dxf", {l.N, l.C}});
  s.push_back({"losses", {l.N}});
  s.push_back({"logits", {chunk, l.V}});
  s.push_back({"lse", {chunk}});
  if (tp.size > 1) s.push_back({"target_logit", {chunk}});
  if (precision == Precision::kBF16) s.push_back({"dlogits16", {chunk, l.V}});
  return s;
}

int64_t loss_chunk_tokens(const ModelConfig& m, int64_t configured, int64_t tokens, Precision precision) {
  const int64_t logits = precision == Precision::kBF16 ? int64_t{32} << 20 : int64_t{8} << 20;  // elements
  int64_t c = configured > 0 ? configured : std::max<int64_t>(16, logits / m.vocab_size);
  return std::min(c, tokens);
}

DType activation_dtype(const std::string& name, Precision precision) {
  if (precision != Precision::kBF16) return DType::kF32;
  for (const char* n : {"xn1", "qkv", "att", "xn2", "gu", "h", "xf", "dh", "dgu", "datt", "dy16", "dlogits16"})
    if (name == n) return DType::kBF16;
  return DType::kF32;
}

namespace {
int64_t sum_bytes(const NamedShapes& s, Precision precision) {
  int64_t n = 0;
  for (auto& [name, shape] : s)
    n = sat_add(n, sat_mul(shape_numel(shape), static_cast<int64_t>(dtype_size(activation_dtype(name, precision)))));
  return n;
}
}  // namespace

bool recomputed_in_backward(const std::string& name, Recompute r) {
  if (r == Recompute::kFull) return true;
  if (r != Recompute::kSelective) return false;
  for (const char* n : {"xn1", "rstd1", "xn2", "rstd2", "h"})
    if (name == n) return true;
  return false;
}

int64_t kept_activation_bytes(const ModelConfig& m, int64_t B, int64_t T, int64_t chunk, Recompute r, LayerSpan span,
                              const TpSplit& tp, Precision precision) {
  NamedShapes per_block, shared;
  for (auto& s : block_activation_shapes(m, B, T, tp))
    (recomputed_in_backward(s.first, r) ? shared : per_block).push_back(s);
  return sat_add(sat_add(sat_mul(span.layers(m), sum_bytes(per_block, precision)), sum_bytes(shared, precision)),
                 sum_bytes(model_activation_shapes(m, B, T, chunk, span, tp, precision), precision));
}

int64_t scratch_activation_bytes(const ModelConfig& m, int64_t B, int64_t T, const TpSplit& tp, Precision precision) {
  return sum_bytes(backward_scratch_shapes(m, B, T, tp, precision), precision);
}

}  // namespace ft

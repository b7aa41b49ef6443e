#include "model/activation_sizes.h"

#include <algorithm>

namespace ft {

NamedShapes block_activation_shapes(const ModelConfig& m, int64_t B, int64_t T) {
  const int64_t N = B * T, C = m.dim, F = m.ffn_dim, HD = m.n_heads * m.head_dim();
  return {{"xn1", {N, C}},       {"rstd1", {N}},      {"qkv", {N, m.qkv_dim()}},
          {"att", {N, HD}},      {"lse", {B, m.n_heads, T}}, {"x_mid", {N, C}},
          {"xn2", {N, C}},       {"rstd2", {N}},      {"gu", {N, 2 * F}},
          {"h", {N, F}}};
}

NamedShapes backward_scratch_shapes(const ModelConfig& m, int64_t B, int64_t T) {
  const int64_t N = B * T, C = m.dim, F = m.ffn_dim, HD = m.n_heads * m.head_dim();
  return {{"d_res", {N, C}}, {"d_mid", {N, C}},  {"d_xn", {N, C}},          {"dh", {N, F}},
          {"dgu", {N, 2 * F}}, {"datt", {N, HD}}, {"dqkv", {N, m.qkv_dim()}}};
}

NamedShapes model_activation_shapes(const ModelConfig& m, int64_t B, int64_t T, int64_t chunk) {
  const int64_t N = B * T, C = m.dim;
  NamedShapes s;
  for (int64_t i = 0; i <= m.n_layers; ++i) s.push_back({"res" + std::to_string(i), {N, C}});
  s.push_back({"xf", {N, C}});
  s.push_back({"rstdf", {N}});
  s.push_back({"dxf", {N, C}});
  s.push_back({"losses", {N}});
  s.push_back({"logits", {chunk, m.vocab_size}});
  s.push_back({"lse", {chunk}});
  return s;
}

int64_t loss_chunk_tokens(const ModelConfig& m, int64_t configured, int64_t tokens) {
  int64_t c = configured > 0 ? configured : std::max<int64_t>(16, (int64_t{8} << 20) / m.vocab_size);
  return std::min(c, tokens);
}

namespace {
int64_t sum_numel(const NamedShapes& s) {
  int64_t n = 0;
  for (auto& [name, shape] : s) n += shape_numel(shape);
  return n;
}
}  // namespace

int64_t kept_activation_bytes(const ModelConfig& m, int64_t B, int64_t T, int64_t chunk, bool recompute) {
  int64_t blocks = recompute ? 1 : m.n_layers;
  return 4 * (blocks * sum_numel(block_activation_shapes(m, B, T)) +
              sum_numel(model_activation_shapes(m, B, T, chunk)));
}

int64_t scratch_activation_bytes(const ModelConfig& m, int64_t B, int64_t T) {
  return 4 * sum_numel(backward_scratch_shapes(m, B, T));
}

}  // namespace ft

#include "model/param_layout.h"

#include <cmath>

#include "util/error.h"
#include "util/hash.h"

namespace ft {

void ParamLayout::add(ParamSpec p) {
  p.unit = local_unit(p.unit);  // built with global unit numbers; stored with local ones
  if (p.unit < 0) return;        // a unit this layout does not hold
  p.offset = total_;
  total_ += p.numel();
  if (static_cast<int>(unit_begin_.size()) <= p.unit) {
    unit_begin_.resize(static_cast<size_t>(p.unit) + 1, p.offset);
    unit_end_.resize(static_cast<size_t>(p.unit) + 1, p.offset);
  }
  unit_end_[static_cast<size_t>(p.unit)] = total_;
  index_[p.name] = specs_.size();
  specs_.push_back(std::move(p));
}

ParamLayout ParamLayout::llama(const ModelConfig& m, int64_t align, const std::vector<int>& units) {
  ParamLayout l;
  const int n_units = static_cast<int>(m.n_layers) + 2;
  for (size_t i = 0; i < units.size(); ++i)
    FT_CHECK(units[i] >= 0 && units[i] < n_units && (i == 0 || units[i] > units[i - 1]),
             "units must ascend within [0, {})", n_units);
  l.global_ = units;
  if (units.empty())
    for (int u = 0; u < n_units; ++u) l.global_.push_back(u);
  l.local_.assign(static_cast<size_t>(n_units), -1);
  for (size_t i = 0; i < l.global_.size(); ++i) l.local_[static_cast<size_t>(l.global_[i])] = static_cast<int>(i);
  const int64_t C = m.dim, D = m.head_dim(), F = m.ffn_dim, V = m.vocab_size;
  const double std = m.init_std;
  // Output projections feed the residual stream: scaled down by sqrt(2 · n_layers) (GPT-2).
  const double out_std = m.init_std / std::sqrt(2.0 * static_cast<double>(m.n_layers));
  auto matrix = [&](std::string name, int unit, Shape shape, double s) {
    ParamSpec p;
    p.name = std::move(name);
    p.global_shape = shape;
    p.shape = shape;
    p.unit = unit;
    p.init_std = s;
    l.add(std::move(p));
  };
  auto norm = [&](std::string name, int unit) {
    ParamSpec p;
    p.name = std::move(name);
    p.global_shape = {C};
    p.shape = {C};
    p.unit = unit;
    p.decay = false;
    l.add(std::move(p));
  };
  matrix("model.embed_tokens.weight", 0, {V, C}, std);
  l.end_unit(0, align);
  for (int64_t i = 0; i < m.n_layers; ++i) {
    int u = static_cast<int>(i) + 1;
    std::string pre = "model.layers." + std::to_string(i) + ".";
    norm(pre + "input_layernorm.weight", u);
    matrix(pre + "self_attn.q_proj.weight", u, {m.n_heads * D, C}, std);
    matrix(pre + "self_attn.k_proj.weight", u, {m.n_kv_heads * D, C}, std);
    matrix(pre + "self_attn.v_proj.weight", u, {m.n_kv_heads * D, C}, std);
    matrix(pre + "self_attn.o_proj.weight", u, {C, m.n_heads * D}, out_std);
    norm(pre + "post_attention_layernorm.weight", u);
    matrix(pre + "mlp.gate_proj.weight", u, {F, C}, std);
    matrix(pre + "mlp.up_proj.weight", u, {F, C}, std);
    matrix(pre + "mlp.down_proj.weight", u, {C, F}, out_std);
    l.end_unit(u, align);
  }
  int head = static_cast<int>(m.n_layers) + 1;
  norm("model.norm.weight", head);
  if (!m.tie_embeddings) matrix("lm_head.weight", head, {V, C}, std);
  l.end_unit(head, align);
  return l;
}

void ParamLayout::end_unit(int unit, int64_t align) {
  unit = local_unit(unit);
  if (unit < 0) return;
  total_ = (total_ + align - 1) / align * align;
  unit_end_[static_cast<size_t>(unit)] = total_;
}

int ParamLayout::local_unit(int global) const {
  return global >= 0 && global < static_cast<int>(local_.size()) ? local_[static_cast<size_t>(global)] : -1;
}

const ParamSpec& ParamLayout::at(const std::string& name) const {
  auto it = index_.find(name);
  FT_CHECK(it != index_.end(), "no parameter named {}", name);
  return specs_[it->second];
}

void ParamLayout::init(float* arena, uint64_t seed) const {
  for (const ParamSpec& p : specs_) {
    float* w = arena + p.offset;
    int64_t n = p.numel();
    if (p.init_std == 0) {
      for (int64_t i = 0; i < n; ++i) w[i] = 1.0f;
      continue;
    }
    uint64_t stream = mix64(seed ^ hash_string(p.name));
    // Global index of local element i: rows of the local shard sit at split_offset along
    // split_dim of the global shape.
    int64_t cols = p.shape.size() == 2 ? p.shape[1] : n;
    int64_t gcols = p.global_shape.size() == 2 ? p.global_shape[1] : n;
    // Row by row: a local row is a contiguous run of global indices.
    const int64_t rows = n / cols;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      int64_t gr = r + (p.split_dim == 0 ? p.split_offset : 0);
      int64_t gc = p.split_dim == 1 ? p.split_offset : 0;
      normal_fill(w + r * cols, stream, static_cast<uint64_t>(gr * gcols + gc), cols, p.init_std);
    }
  }
}

}  // namespace ft

#include "model/layout_sizes.h"

#include <algorithm>

#include "util/error.h"

namespace ft {

int64_t layers_per_stage(const ModelConfig& m, int64_t pp) {
  FT_CHECK(pp > 0, "pp = {}", pp);
  return (m.n_layers + pp - 1) / pp;
}

int64_t rank_params(const ModelConfig& m, int64_t tp, int64_t pp, bool first_stage, bool last_stage) {
  // Matrices are split by tp; the (small) norm weights are replicated.
  const int64_t norms = 2 * m.dim;
  const int64_t matrices = m.params_per_layer() - norms;
  int64_t p = layers_per_stage(m, pp) * (matrices / tp + norms);
  const bool one_stage = pp == 1;
  if (first_stage || one_stage) p += m.embedding_params() / tp;
  if (last_stage || one_stage) {
    p += m.dim;  // final norm
    if (!m.tie_embeddings || (!first_stage && !one_stage)) p += m.vocab_size * m.dim / tp;
  }
  return p;
}

double gpu_layer_activation_bytes(const ModelConfig& m, double tokens, int64_t seq_len, int64_t tp,
                                  bool sequence_parallel, ActRecompute rc, bool flash_attention) {
  const double h = static_cast<double>(m.dim);
  const double t = static_cast<double>(tp);
  const double rep_div = sequence_parallel ? t : 1.0;
  if (rc == ActRecompute::kFull) return 2.0 * tokens * h / rep_div;
  const double hq = static_cast<double>(m.n_heads * m.head_dim());
  const double hkv = static_cast<double>(m.n_kv_heads * m.head_dim());
  const double f = static_cast<double>(m.ffn_dim);
  const bool selective = rc == ActRecompute::kSelective;    // the norm outputs and the product are recomputed
  const double replicated = (selective ? 2 : 4) * 2.0 * h;  // 2 norm inputs, 2 GEMM inputs (the norm outputs)
  const double split = 2.0 * (hq + 2 * hkv)                 // Q, K, V
                       + 2.0 * hq + 4.0 * m.n_heads         // attention output, fp32 lse
                       + 2.0 * (selective ? 2 : 3) * f;     // gate, up, silu(gate)*up
  double bytes = tokens * (replicated / rep_div + split / t);
  if (!flash_attention) bytes += 2.0 * m.n_heads * static_cast<double>(seq_len) * tokens / t;
  return bytes;
}

}  // namespace ft

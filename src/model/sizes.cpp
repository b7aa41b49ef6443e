#include "model/sizes.h"

#include <algorithm>

#include "util/error.h"

namespace ft {

const char* act_recompute_name(ActRecompute r) {
  switch (r) {
    case ActRecompute::kNone: return "none";
    case ActRecompute::kSelective: return "selective";
    case ActRecompute::kFull: return "full";
  }
  return "?";
}

int64_t layers_per_stage(const ModelConfig& m, int64_t pp) {
  FT_CHECK(pp > 0, "pp = {}", pp);
  return (m.n_layers + pp - 1) / pp;
}

int64_t resolve_loss_chunk_tokens(int64_t configured, int64_t vocab_size, int64_t tokens) {
  int64_t chunk = configured > 0 ? configured : (int64_t{32} << 20) / (4 * std::max<int64_t>(vocab_size, 1));
  return std::clamp<int64_t>(chunk, 1, std::max<int64_t>(tokens, 1));
}

std::vector<SizedBuffer> block_activation_buffers(const ModelConfig& m, const StepShape& s) {
  const int64_t n = s.micro_batch * s.seq_len;  // tokens
  const int64_t c = m.dim, d = m.head_dim();
  const int64_t h = m.n_heads / s.tp, hkv = std::max<int64_t>(m.n_kv_heads / s.tp, 1);
  const int64_t f = m.ffn_dim / s.tp;
  return {
      {"xn1", n * c},                  // attention norm output (input of the QKV GEMM)
      {"rstd1", n},                    // its reciprocal RMS
      {"qkv", n * (h + 2 * hkv) * d},  // rotated Q, K and V
      {"att_out", n * h * d},          // attention output (input of the output projection)
      {"lse", s.micro_batch * h * s.seq_len},  // log-sum-exp of each attention row
      {"x_mid", n * c},                // residual stream after attention
      {"xn2", n * c},                  // MLP norm output (input of the gate/up GEMM)
      {"rstd2", n},
      {"gate_up", n * 2 * f},          // gate and up projections
      {"h", n * f},                    // silu(gate) * up (input of the down projection)
  };
}

std::vector<SizedBuffer> backward_scratch_buffers(const ModelConfig& m, const StepShape& s) {
  const int64_t n = s.micro_batch * s.seq_len;
  const int64_t c = m.dim, d = m.head_dim();
  const int64_t h = m.n_heads / s.tp, hkv = std::max<int64_t>(m.n_kv_heads / s.tp, 1);
  const int64_t f = m.ffn_dim / s.tp;
  return {
      {"dresidual", n * c, 2},         // gradient of the residual stream (in, out)
      {"dgate_up", n * 2 * f},
      {"dh", n * f},
      {"dqkv", n * (h + 2 * hkv) * d},
      {"datt_out", n * h * d},
      {"dxn", n * c},                  // gradient of a norm output
  };
}

std::vector<SizedBuffer> activation_buffers(const ModelConfig& m, const StepShape& s) {
  const int64_t n = s.micro_batch * s.seq_len;
  const int64_t layers = layers_per_stage(m, s.pp);
  const int64_t block_sets = s.recompute ? 1 : layers;
  std::vector<SizedBuffer> out;
  for (auto b : block_activation_buffers(m, s)) {
    b.count = block_sets;
    out.push_back(b);
  }
  out.push_back({"residual", n * m.dim, layers + 1});
  if (s.last_stage) {
    out.push_back({"final_norm_out", n * m.dim});
    out.push_back({"final_rstd", n});
  }
  for (auto& b : backward_scratch_buffers(m, s)) out.push_back(b);
  return out;
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

TrainerMemory cpu_trainer_memory(const ModelConfig& m, const StepShape& s) {
  constexpr int64_t kF32 = 4;
  const int64_t params = rank_params(m, s.tp, s.pp, s.first_stage, s.last_stage);
  const int64_t dp = std::max<int64_t>(s.dp, 1);
  auto shard = [&](int64_t count, bool sharded) { return sharded ? (count + dp - 1) / dp : count; };
  TrainerMemory out;
  out.parameters = shard(params, s.zero >= 3) * kF32;
  out.gradients = shard(params, s.zero >= 2) * kF32;
  out.optimizer_state = shard(params, s.zero >= 1) * 2 * kF32;
  int64_t act = 0;
  for (const auto& b : activation_buffers(m, s)) act += b.total();
  out.activations = act * kF32;
  if (s.last_stage) {
    const int64_t n = s.micro_batch * s.seq_len;
    out.workspace = resolve_loss_chunk_tokens(s.loss_chunk_tokens, m.vocab_size, n) * (m.vocab_size / s.tp) * kF32;
  }
  return out;
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
  const double replicated = 4 * 2.0 * h;                      // 2 norm inputs, 2 GEMM inputs
  const double split = 2.0 * (hq + 2 * hkv)                    // Q, K, V
                       + 2.0 * hq + 4.0 * m.n_heads            // attention output, fp32 lse
                       + 2.0 * 3 * f;                          // gate, up, silu(gate)*up
  double bytes = tokens * (replicated / rep_div + split / t);
  if (!flash_attention && rc == ActRecompute::kNone)
    bytes += 2.0 * m.n_heads * static_cast<double>(seq_len) * tokens / t;
  return bytes;
}

}  // namespace ft

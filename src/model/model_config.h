// ModelConfig: the LLaMA architecture's shape, with LLaMA's own key names, named presets, and the
// size functions (parameters, FLOPs) that the trainer, the planner and the checkpoint code share.
//
//   ModelConfig m = model_preset("llama-20m");
//   m.validate();                       // throws ft::Error naming the numbers that do not divide
//   int64_t n = m.num_params();         // exact count of trainable parameters
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ft {

class ConfigBinder;

// model.recompute: what a block keeps for its backward (model/activations.h has the table).
//   none       everything;
//   selective  the GEMM outputs (qkv, att, gu), attention's log-sum-exp and the residual x_mid;
//              the norms and SwiGLU's output are recomputed just before the block's backward;
//   full       only the block's input; the whole block forward runs again before its backward.
enum class Recompute : uint8_t { kNone = 0, kFull = 1, kSelective = 2 };
const char* recompute_name(Recompute r);  // "none", "selective", "full"

struct ModelConfig {
  std::string preset = "tiny";  // the preset the values started from
  int64_t dim = 64;             // hidden size (d_model)
  int64_t n_layers = 4;
  int64_t n_heads = 4;
  int64_t n_kv_heads = 2;  // grouped-query attention: n_heads % n_kv_heads == 0
  int64_t vocab_size = 256;
  int64_t ffn_dim = 160;  // SwiGLU hidden size
  double norm_eps = 1e-5;
  double rope_theta = 10000.0;
  bool tie_embeddings = false;
  int64_t max_seq_len = 4096;  // size of the RoPE tables
  Recompute recompute = Recompute::kNone;
  double init_std = 0.02;  // normal(0, init_std) for matrices; output projections scaled

  void bind(ConfigBinder& b);
  void validate() const;  // throws ft::Error

  int64_t head_dim() const { return dim / n_heads; }
  int64_t qkv_dim() const { return (n_heads + 2 * n_kv_heads) * head_dim(); }

  // Trainable parameters.
  int64_t params_per_layer() const;
  int64_t embedding_params() const { return vocab_size * dim; }
  int64_t num_params() const;
  // Parameters that take part in matrix multiplies per token (excludes the embedding table
  // lookup, includes the LM head).
  int64_t matmul_params() const;

  // Training FLOPs per token for a sequence of length T (forward + backward), the convention
  // used for MFU everywhere in fluxtrain:
  //   6 · N_matmul + 12 · n_layers · dim · T
  // where the second term is attention's QKᵀ and AV products (forward 2·2·T·d per layer per
  // token, causal masking not discounted, backward twice the forward), as in the PaLM paper.
  double train_flops_per_token(int64_t seq_len) const;
};

// Presets: "tiny" (tests), "llama-20m", "llama-125m", "llama2-7b", "llama2-13b", "llama2-70b".
ModelConfig model_preset(const std::string& name);
std::vector<std::string> model_preset_names();

}  // namespace ft

#include "model/model_config.h"

#include <cstdint>
#include <limits>

#include "util/config_binder.h"
#include "util/error.h"
#include "util/strings.h"

namespace ft {

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "?";
}

void ModelConfig::bind(ConfigBinder& b) {
  b.add("model.preset", &preset, "preset the model shape starts from (applied before other keys)");
  b.add("model.dim", &dim, "hidden size");
  b.add("model.n_layers", &n_layers, "number of transformer blocks");
  b.add("model.n_heads", &n_heads, "attention (query) heads");
  b.add("model.n_kv_heads", &n_kv_heads, "key/value heads (grouped-query attention)");
  b.add("model.vocab_size", &vocab_size, "vocabulary size");
  b.add("model.ffn_dim", &ffn_dim, "SwiGLU hidden size");
  b.add("model.norm_eps", &norm_eps, "RMSNorm epsilon");
  b.add("model.rope_theta", &rope_theta, "RoPE base");
  b.add("model.tie_embeddings", &tie_embeddings, "share the embedding table with the LM head");
  b.add("model.max_seq_len", &max_seq_len, "longest sequence the RoPE tables cover");
  b.add_enum("model.recompute", &recompute,
             {{"none", Recompute::kNone}, {"selective", Recompute::kSelective}, {"full", Recompute::kFull}},
             "recompute block activations in backward instead of keeping them: selective recomputes the norms "
             "and SwiGLU, full the whole block");
  b.add("model.init_std", &init_std, "standard deviation of the weight initialisation");
}

void ModelConfig::validate() const {
  auto positive = [](const char* key, int64_t v) {
    if (v <= 0)
      throw Error(fmt::format("{} = {} must be positive", key, v), fmt::format("set {} to an integer >= 1", key));
  };
  positive("model.dim", dim);
  positive("model.n_layers", n_layers);
  positive("model.n_heads", n_heads);
  positive("model.n_kv_heads", n_kv_heads);
  positive("model.vocab_size", vocab_size);
  positive("model.ffn_dim", ffn_dim);
  positive("model.max_seq_len", max_seq_len);
  // One token can only be predicted among two or more (the synthetic data's progressions divide
  // by vocab_size - 1); token ids are int32 everywhere (shards, batches, the embedding lookup).
  if (vocab_size < 2 || vocab_size > std::numeric_limits<int32_t>::max()) {
    throw Error(fmt::format("model.vocab_size = {} is not valid: expected an integer from 2 to {} (token ids are "
                            "32-bit)",
                            vocab_size, std::numeric_limits<int32_t>::max()),
                "a dataset sets it from its tokenizer; otherwise e.g. --set model.vocab_size=256");
  }
  if (dim % n_heads != 0) {
    throw Error(fmt::format("model.dim = {} is not divisible by model.n_heads = {}", dim, n_heads),
                fmt::format("pick n_heads dividing {} (e.g. {}) or a dim that is a multiple of {}", dim,
                            dim % 64 == 0 ? dim / 64 : 1, n_heads));
  }
  if (n_heads % n_kv_heads != 0) {
    throw Error(fmt::format("model.n_heads = {} is not divisible by model.n_kv_heads = {}", n_heads, n_kv_heads),
                "each key/value head serves a whole group of query heads; use a divisor of n_heads");
  }
  if (head_dim() % 2 != 0) {
    throw Error(fmt::format("head dim = model.dim / model.n_heads = {} / {} = {} is odd", dim, n_heads, head_dim()),
                "RoPE rotates pairs of dimensions; the head dim must be even");
  }
  if (!(init_std > 0))
    throw Error(fmt::format("model.init_std = {} is not valid: expected a number > 0", init_std),
                "the standard deviation of the initial weights, e.g. 0.02");
  if (!(norm_eps > 0)) throw Error(fmt::format("model.norm_eps = {} must be > 0", norm_eps));
  if (!(rope_theta > 0)) throw Error(fmt::format("model.rope_theta = {} must be > 0", rope_theta));
}

int64_t ModelConfig::params_per_layer() const {
  int64_t attn = dim * qkv_dim() + n_heads * head_dim() * dim;
  int64_t mlp = 3 * dim * ffn_dim;
  int64_t norms = 2 * dim;
  return attn + mlp + norms;
}

int64_t ModelConfig::num_params() const {
  int64_t head = tie_embeddings ? 0 : vocab_size * dim;
  return embedding_params() + n_layers * params_per_layer() + dim + head;
}

int64_t ModelConfig::matmul_params() const {
  return n_layers * (params_per_layer() - 2 * dim) + vocab_size * dim;
}

double ModelConfig::train_flops_per_token(int64_t seq_len) const {
  return 6.0 * static_cast<double>(matmul_params()) +
         12.0 * static_cast<double>(n_layers * dim) * static_cast<double>(seq_len);
}

std::vector<std::string> model_preset_names() {
  return {"tiny", "llama-20m", "llama-125m", "llama2-7b", "llama2-13b", "llama2-70b"};
}

ModelConfig model_preset(const std::string& name) {
  ModelConfig m;
  m.preset = name;
  auto shape = [&](int64_t dim, int64_t layers, int64_t heads, int64_t kv, int64_t ffn, int64_t vocab) {
    m.dim = dim;
    m.n_layers = layers;
    m.n_heads = heads;
    m.n_kv_heads = kv;
    m.ffn_dim = ffn;
    m.vocab_size = vocab;
  };
  if (name == "tiny") {
    shape(64, 4, 4, 2, 160, 256);  // divisible by tp = 2, 4 and pp up to 4
  } else if (name == "llama-20m") {
    shape(384, 6, 6, 6, 1024, 32000);
    m.tie_embeddings = true;
  } else if (name == "llama-125m") {
    shape(768, 12, 12, 12, 2048, 32000);
    m.tie_embeddings = true;
  } else if (name == "llama2-7b") {  // LLaMA 2 paper, Table 1 and the released configs
    shape(4096, 32, 32, 32, 11008, 32000);
  } else if (name == "llama2-13b") {
    shape(5120, 40, 40, 40, 13824, 32000);
  } else if (name == "llama2-70b") {
    shape(8192, 80, 64, 8, 28672, 32000);
  } else {
    throw Error(fmt::format("unknown model preset '{}'", name),
                fmt::format("known presets: tiny, llama-20m, llama-125m, llama2-7b, llama2-13b, "
                            "llama2-70b (closest: {})",
                            closest_match(name, model_preset_names())));
  }
  if (name.rfind("llama2-", 0) == 0) m.max_seq_len = 4096;
  return m;
}

}  // namespace ft

// Decoder: text generation with a trained LLaMA, one sequence at a time, with a KV cache — the
// prompt is fed once (prefill), then each new token costs one position (ops kv_cache_write,
// attention_decode). Sampling: greedy (temperature 0), temperature, top-p (nucleus), with a
// counter-based RNG so a seed reproduces a generation.
//
//   ParamLayout layout = ParamLayout::llama(cfg);               // one process, whole model
//   Decoder d(ctx, cfg, layout, weights, /*max_positions=*/512);     // weights: layout.total() floats
//   const std::vector<float>& logits = d.feed(prompt_ids);      // (vocab) after the last token
//   int32_t next = sample_token(logits, {.temperature = 0.8, .top_p = 0.95, .seed = 1}, 0);
//   d.feed({next});
#pragma once

#include <cstdint>
#include <vector>

#include "model/model_config.h"
#include "model/param_layout.h"
#include "tensor/exec_context.h"
#include "tensor/tensor.h"

namespace ft {

class Decoder {
 public:
  // Its ops run on ctx.
  Decoder(const ExecContext& ctx, const ModelConfig& cfg, const ParamLayout& layout, const float* weights,
          int64_t max_positions);

  // Runs `tokens` at the next positions; returns the logits after the last one. Throws ft::Error
  // past max_positions or for a token outside the vocabulary.
  const std::vector<float>& feed(const std::vector<int32_t>& tokens);
  // Logits of every fed position of the last feed() (tokens, vocab) when keep_all was set.
  void set_keep_all_logits(bool keep) { keep_all_ = keep; }
  const std::vector<float>& all_logits() const { return all_logits_; }
  int64_t position() const { return pos_; }
  void reset() { pos_ = 0; }

 private:
  struct Layer {
    const float *attn_norm, *wqkv, *wo, *mlp_norm, *w13, *w2;
    Tensor k_cache, v_cache;  // (Hkv, max_positions, D)
  };
  ExecContext ctx_;
  // One feed of T tokens: its ids, the residual stream, a norm's output and rstd, the layer's
  // qkv, attention output, gate/up and SwiGLU output, and the head's logits (T or 1 rows).
  struct Buffers {
    Tensor tokens, x, h, rstd, qkv, att, gu, a, logits;
    int64_t tokens_capacity = 0;  // the T they hold room for
  };
  Buffers& buffers(int64_t T);
  ModelConfig cfg_;
  int64_t max_pos_, H_, Hkv_, D_, F_, V_, C_;
  const float *embed_, *final_norm_, *head_;
  std::vector<Layer> layers_;
  Tensor cos_, sin_;
  int64_t pos_ = 0;
  bool keep_all_ = false;
  Buffers buffers_;
  std::vector<float> logits_, all_logits_;  // read back to the host
};

struct SampleOptions {
  double temperature = 0;  // 0: greedy (argmax)
  double top_p = 1.0;      // nucleus: the smallest set of tokens whose probability reaches top_p
  uint64_t seed = 0;
};

// Samples token `index` of a generation from logits.
int32_t sample_token(const std::vector<float>& logits, const SampleOptions& o, uint64_t index);

}  // namespace ft

// ContextSplit: how context parallelism (parallel.cp > 1) divides each sample's sequence, as the
// single-device model sees it. The T = train.seq_len tokens of a sample are cut into 2·cp chunks of
// c = T / (2·cp); cp rank r holds chunks r and 2·cp − 1 − r (the zig-zag split: under the causal
// mask every rank then does the same attention work), T / cp tokens in that order. The model
// loads those tokens and their targets, rotates them by their true positions, and leaves
// attention across the split to attention_forward / attention_backward, which
// parallel/context_parallel implements over the cp group (RingAttention). Everything else in a
// block is per token and needs nothing.
//
//   RingAttention ring(ctx, mesh.cp(), cfg.train.seq_len);
//   Llama model(ctx, cfg, layout, Precision::kBF16, tp, &ring);  // acts: T = seq_len / cp tokens
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace ft {

// The [begin, end) positions of the two chunks cp rank r holds of a sequence of T tokens
// (T a multiple of 2·cp), in the order the rank holds them.
inline std::vector<std::pair<int64_t, int64_t>> zigzag_ranges(int64_t T, int64_t cp, int64_t r) {
  const int64_t c = T / (2 * cp);
  return {{r * c, (r + 1) * c}, {(2 * cp - 1 - r) * c, (2 * cp - r) * c}};
}

// The true positions of the T / cp tokens cp rank r holds, ascending.
inline std::vector<int64_t> zigzag_positions(int64_t T, int64_t cp, int64_t r) {
  std::vector<int64_t> pos;
  for (auto [b, e] : zigzag_ranges(T, cp, r))
    for (int64_t p = b; p < e; ++p) pos.push_back(p);
  return pos;
}

class ContextSplit {
 public:
  ContextSplit(int64_t size, int64_t rank, int64_t seq_len, bool dry = false)
      : size_(size), rank_(rank), seq_len_(seq_len), dry_(dry) {}
  virtual ~ContextSplit() = default;
  // Transfers only (the dry run's step trace, dryrun/step_trace.h, over fake communicators): every
  // transfer is issued with its size and no buffer, nothing is computed or allocated, so it runs
  // beside any device's model (the recording GPU's) at any size.
  bool dry() const { return dry_; }
  int64_t size() const { return size_; }
  int64_t rank() const { return rank_; }
  int64_t seq_len() const { return seq_len_; }               // T, the whole sample
  int64_t local_tokens() const { return seq_len_ / size_; }  // this rank's T / cp
  std::vector<std::pair<int64_t, int64_t>> ranges() const { return zigzag_ranges(seq_len_, size_, rank_); }
  std::vector<int64_t> positions() const { return zigzag_positions(seq_len_, size_, rank_); }
  // The query and key/value heads of this rank's attention (after tensor parallelism), told by
  // the model once: an ft::Error when the split cannot take them.
  virtual void use_heads(int64_t H, int64_t Hkv) {}

  // Causal attention of this rank's queries against the keys and values of the whole sample
  // (every rank's): out (B, T/cp, H·D), lse (B, H, T/cp) from qkv (B, T/cp, (H + 2 Hkv) D) after
  // RoPE, as ops::attention_forward computes them on the unsplit sequence.
  virtual void attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t H, int64_t Hkv,
                                 int64_t D) = 0;
  // Its backward: dqkv (B, T/cp, (H + 2 Hkv) D) written, as ops::attention_backward.
  virtual void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse,
                                  int64_t B, int64_t H, int64_t Hkv, int64_t D) = 0;
  // The same in bf16 training (train.precision = "bf16"), as ops::attention_forward_bf16 /
  // _backward_bf16 on the unsplit sequence: qkv, out, dout, dqkv bf16 (uint16_t bit patterns), lse
  // fp32. What travels between the ranks is bf16 too (half of fp32's bytes).
  virtual void attention_forward_bf16(uint16_t* out, float* lse, const uint16_t* qkv, int64_t B, int64_t H, int64_t Hkv,
                                      int64_t D) = 0;
  virtual void attention_backward_bf16(uint16_t* dqkv, const uint16_t* dout, const uint16_t* qkv, const uint16_t* out,
                                       const float* lse, int64_t B, int64_t H, int64_t Hkv, int64_t D) = 0;

 private:
  int64_t size_, rank_, seq_len_;
  bool dry_;
};

}  // namespace ft

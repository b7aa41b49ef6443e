// RingAttention: context parallelism's attention (parallel.cp_attention = "ring") over the cp
// group, on CPU ranks (MPI). Every rank holds the zig-zag chunks of each sample
// (model/context_split.h); its keys and values travel around the ring, next = rank + 1:
//
//   forward, cp steps: attend this rank's queries to the block in hand (its own first), merging
//     the partial outputs by their log-sum-exp (cpu::attention_block_forward) while the block
//     moves on to the next rank and the previous rank's arrives (non-blocking send/receive,
//     overlapped with the block's compute);
//   backward, cp steps: the blocks travel again, each with the dk, dv accumulated for it so far;
//     a rank adds its queries' share (cpu::attention_block_backward) and passes both on; after the
//     last step one more hop brings every block's dk, dv home. dq stays local. The dk, dv hop
//     waits for the block's compute (it carries its result); the next block's keys and values
//     arrive meanwhile.
// Causality is by true position, so key blocks a query block cannot see cost nothing.
//
// overlap() says how much of the ring's communication the compute hides: the time blocked on the
// overlapped key/value transfers (after the block's compute) against what those transfers cost
// alone, estimated by the blocking dk/dv hops of the same size in backward.
//
//   RingAttention ring(mesh.cp(), cfg.train.seq_len);
//   Llama model(ctx, cfg, layout, Precision::kF32, tp, &ring);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/context_split.h"
#include "parallel/comm/comm.h"

namespace ft {

class RingAttention : public ContextSplit {
 public:
  // seq_len: the whole sample's T (a multiple of 2·cp); the group's ranks hold chunks in its order.
  // dry: transfers only (ContextSplit::dry).
  RingAttention(Communicator& cp, int64_t seq_len, bool dry = false);

  // The bytes of one block in flight: a rank's keys and values of B sequences. The ring keeps two
  // (in hand, arriving), in backward two more for their dk, dv and the softmax delta (B, H, T/cp):
  // plan/context_parallel.h counts them.
  static int64_t block_bytes(int64_t B, int64_t local_tokens, int64_t Hkv, int64_t D) {
    return B * local_tokens * 2 * Hkv * D * static_cast<int64_t>(sizeof(float));
  }

  void attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t H, int64_t Hkv,
                         int64_t D) override;
  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse,
                          int64_t B, int64_t H, int64_t Hkv, int64_t D) override;

  // Since construction, seconds on this rank.
  struct Overlap {
    int64_t transfers = 0;  // key/value blocks sent on while a block was computed
    double compute_s = 0;   // the block computes those transfers overlapped
    double wait_s = 0;      // blocked on those transfers after the compute: the exposed part
    int64_t hops = 0;       // dk, dv hops (backward): the same bytes, not overlapped
    double hop_s = 0;
    // The share of the overlapped transfers' time the compute hid: 1 − wait / (transfers · one
    // hop's time); NaN before a backward has run.
    double hidden_share() const;
  };
  const Overlap& overlap() const { return overlap_; }
  std::string describe_overlap() const;

 private:
  // The positions of the block of the cp rank `owner`.
  const int64_t* positions_of(int64_t owner) const { return positions_[static_cast<size_t>(owner)].data(); }
  // kv_, dkv_ (two each: in hand and arriving) for B sequences (nothing when dry).
  void reserve(int64_t B, int64_t Hkv, int64_t D, bool backward);
  // Buffer i of kv_ or dkv_ (null when dry).
  static float* at(std::vector<float>& b) { return b.empty() ? nullptr : b.data(); }
  int next() const { return static_cast<int>((rank() + 1) % size()); }
  int prev() const { return static_cast<int>((rank() + size() - 1) % size()); }

  Communicator& comm_;
  std::vector<std::vector<int64_t>> positions_;  // per cp rank
  std::vector<float> kv_[2], dkv_[2], delta_;
  Overlap overlap_;
};

}  // namespace ft

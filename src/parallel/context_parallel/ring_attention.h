// RingAttention: context parallelism's attention (parallel.cp_attention = "ring") over the cp
// group: on CPU ranks over MPI, on GPU ranks over NcclComm (device buffers; each transfer joined to
// the compute stream with Work::stream_wait, so the host never waits on the ring). Every rank holds the zig-zag chunks
// of each sample (model/context_split.h); its keys and values travel around the ring, next = rank + 1:
//
//   forward, cp steps: attend this rank's queries to the block in hand (its own first), merging
//     the partial outputs by their log-sum-exp (ops::attention_block_forward) while the block
//     moves on to the next rank and the previous rank's arrives (non-blocking send/receive,
//     overlapped with the block's compute);
//   backward, cp steps: the blocks travel again, each with the dk, dv accumulated for it so far;
//     a rank adds its queries' share (ops::attention_block_backward) and passes both on; after the
//     last step one more hop brings every block's dk, dv home. dq stays local. The dk, dv hop
//     waits for the block's compute (it carries its result); the next block's keys and values
//     arrive meanwhile.
// Causality is by true position, so key blocks a query block cannot see cost nothing.
// In bf16 training (attention_forward_bf16 / _backward_bf16) the blocks and their dk, dv travel as
// bf16 (half the bytes): the partial outputs, lse and dq stay fp32 on the rank (merged, summed),
// out and dqkv are rounded once at the end; a block's dk, dv are summed in fp32 by each rank's
// block op and rounded once per hop (cp roundings of the sum, as the ring frameworks do in bf16).
//
// overlap() says how much of the ring's communication the compute hides: the time the compute
// stream stalled on the overlapped key/value transfers (after the block's compute) against what
// those transfers cost alone, estimated by the dk/dv hops of the same size in backward (which wait
// for their block's compute: nothing overlaps them). Timed where the work runs (StreamTimer: the
// host clock on the CPU, the device's timing marks on a GPU, so the host still never waits).
//
//   RingAttention ring(ctx, mesh.cp(), cfg.train.seq_len);
//   Llama model(ctx, cfg, layout, Precision::kBF16, tp, &ring);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/context_split.h"
#include "parallel/comm/comm.h"
#include "tensor/exec_context.h"
#include "tensor/stream_timer.h"
#include "tensor/tensor.h"

namespace ft {

class RingAttention : public ContextSplit {
 public:
  // seq_len: the whole sample's T (a multiple of 2·cp); the group's ranks hold chunks in its order.
  // ctx: where the blocks live and the block attention runs (the model's context).
  // dry: transfers only (ContextSplit::dry): no buffer is allocated and nothing runs on ctx.
  RingAttention(const ExecContext& ctx, Communicator& cp, int64_t seq_len, bool dry = false);

  // The bytes of one block in flight: a rank's keys and values of B sequences, elem bytes each
  // (4: fp32, 2: bf16). The ring keeps two (in hand, arriving), in backward two more for their dk,
  // dv: plan/context_parallel.h counts them.
  static int64_t block_bytes(int64_t B, int64_t local_tokens, int64_t Hkv, int64_t D, int64_t elem = 4) {
    return B * local_tokens * 2 * Hkv * D * elem;
  }

  void attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t H, int64_t Hkv,
                         int64_t D) override;
  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse,
                          int64_t B, int64_t H, int64_t Hkv, int64_t D) override;
  void attention_forward_bf16(uint16_t* out, float* lse, const uint16_t* qkv, int64_t B, int64_t H, int64_t Hkv,
                              int64_t D) override;
  void attention_backward_bf16(uint16_t* dqkv, const uint16_t* dout, const uint16_t* qkv, const uint16_t* out,
                               const float* lse, int64_t B, int64_t H, int64_t Hkv, int64_t D) override;

  // Since construction, seconds on this rank's compute stream (up to the last settle_overlap()).
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
  // Adds the timed intervals to overlap(): call when ctx's stream has finished the ring's work
  // (after a step's read-back); on the CPU any time.
  void settle_overlap();
  // One log line (settles first).
  std::string describe_overlap();

 private:
  // The positions (on ctx's device) of the block of the cp rank `owner` (null when dry).
  const int32_t* positions_of(int64_t owner) const;
  // kv_, dkv_ (two each: in hand and arriving) for B sequences of elem-byte elements (nothing when dry).
  void reserve(int64_t B, int64_t Hkv, int64_t D, bool backward, int64_t elem);
  // kv (B, T/cp, 2 Hkv D) = the key and value heads of qkv (B, T/cp, (H + 2 Hkv) D), elem bytes each.
  void pack_kv(void* kv, const void* qkv, int64_t B, int64_t H, int64_t Hkv, int64_t D, int64_t elem) const;
  // The key and value heads of dqkv (B, T/cp, (H + 2 Hkv) D) = dkv (B, T/cp, 2 Hkv D).
  void unpack_dkv(void* dqkv, const void* dkv, int64_t B, int64_t H, int64_t Hkv, int64_t D, int64_t elem) const;
  // The ring's loops, the block op given: block(kv, owner, accumulate) in forward,
  // block(dkv, kv, owner) in backward (elem: the bytes of a travelling element).
  template <typename Block>
  void ring_forward(const void* qkv, int64_t B, int64_t H, int64_t Hkv, int64_t D, int64_t elem, Block block);
  // ring_backward returns the buffer that holds this rank's own block's dk, dv from every rank at
  // the end (null when dry).
  template <typename Block>
  void* ring_backward(const void* qkv, int64_t B, int64_t H, int64_t Hkv, int64_t D, int64_t elem, Block block);
  // t holding at least n bytes on ctx's device (reallocated when smaller); null when dry.
  void* fit(Tensor& t, int64_t bytes, MemCategory cat) const;
  // The data of a buffer (null when dry: never allocated).
  static void* at(Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }
  int next() const { return static_cast<int>((rank() + 1) % size()); }
  int prev() const { return static_cast<int>((rank() + size() - 1) % size()); }

  ExecContext ctx_;
  Communicator& comm_;
  std::vector<int32_t> host_positions_;  // (cp, T/cp): every rank's, the source of positions_
  Tensor positions_;
  Tensor kv_[2], dkv_[2];
  Tensor out32_, dqkv32_;  // bf16: the fp32 partial output and dq (B, T/cp, H D) / (B, T/cp, (H + 2 Hkv) D)
  // The intervals not yet in overlap_ (settle_overlap): block compute, the stall on its overlapped
  // transfers, the dk/dv hops.
  StreamTimer compute_timer_, wait_timer_, hop_timer_;
  Overlap overlap_;
};

}  // namespace ft

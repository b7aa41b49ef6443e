// The attention work of a context-parallel step as the step trace records it (dryrun/step_trace.h,
// `fluxtrain plan --step-trace` with parallel.cp > 1). The schedules run their attention on CPU
// ranks, which the recording GPU does not model, so the trace runs them dry (ContextSplit::dry:
// their own loops issue every transfer, computing nothing) and this wrapper records beside each
// call the ops the schedule computes per rank, priced on the GPU as the fp32 flash attention:
//
//   ring        per step s of cp: attention_block_forward of the rank's T/cp queries against the
//               block of the rank (rank − s) mod cp — its FLOPs the causal pairs of the two zig-zag
//               chunk pairs (a key block the queries cannot see costs nothing) — with the K/V
//               transfer it runs beside (OpRecord::overlapped_send_bytes: every step but the last);
//               backward attention_block_backward likewise (the dK/dV hop after it is not hidden);
//   all_to_all  attention_forward / attention_backward over the whole sequence of the rank's H/cp
//               heads (its kv heads: Hkv/cp, or the one replicated head) — the op it calls.
//
// A block's record names its visible pairs in its shape (" pairs=N", trace::cost::set_block_pairs),
// as the timed CPU's record of the same block does, so `plan --profile-file` prices each block by
// its own measurement.
//
//   RingAttention ring(mesh.cp(), T, /*dry=*/true);
//   CpOpRecorder rec(ring);                 // the model's ContextSplit
//   ... step ...;  std::vector<plan::OpRecord> ops = rec.take();
#pragma once

#include <vector>

#include "model/context_split.h"
#include "parallel/parallel_config.h"
#include "plan/op_trace.h"

namespace ft {

class CpOpRecorder : public ContextSplit {
 public:
  // inner: a dry RingAttention or UlyssesAttention (its schedule is `schedule`).
  CpOpRecorder(ContextSplit& inner, CpAttention schedule);

  void use_heads(int64_t H, int64_t Hkv) override { inner_.use_heads(H, Hkv); }
  void attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t H, int64_t Hkv,
                         int64_t D) override;
  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse,
                          int64_t B, int64_t H, int64_t Hkv, int64_t D) override;
  void attention_forward_bf16(uint16_t* out, float* lse, const uint16_t* qkv, int64_t B, int64_t H, int64_t Hkv,
                              int64_t D) override;
  void attention_backward_bf16(uint16_t* dqkv, const uint16_t* dout, const uint16_t* qkv, const uint16_t* out,
                               const float* lse, int64_t B, int64_t H, int64_t Hkv, int64_t D) override;

  // The records since the last take(), in call order.
  std::vector<plan::OpRecord> take();

  // (query, key) pairs with key position <= query position between the zig-zag chunks of cp ranks
  // q_rank (queries) and k_rank (keys) of a sequence of T tokens (T a multiple of 2·cp).
  static double causal_pairs(int64_t T, int64_t cp, int64_t q_rank, int64_t k_rank);

 private:
  // The ops of one call (elem: 4 fp32, 2 bf16 — the _bf16 block ops, the SDPA attention).
  void record_forward(int64_t B, int64_t H, int64_t Hkv, int64_t D, int64_t elem);
  void record_backward(int64_t B, int64_t H, int64_t Hkv, int64_t D, int64_t elem);

  ContextSplit& inner_;
  CpAttention schedule_;
  std::vector<plan::OpRecord> ops_;
};

}  // namespace ft

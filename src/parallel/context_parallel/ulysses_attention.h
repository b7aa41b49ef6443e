// UlyssesAttention: context parallelism's attention by all-to-all (parallel.cp_attention =
// "all_to_all", DeepSpeed-Ulysses), on CPU ranks over MPI and on GPU ranks over NcclComm (device
// buffers; the rearrangements are strided device copies, mem_copy_2d; transfers joined to the
// compute stream with Work::stream_wait). Before attention each rank trades its
// tokens' heads for whole sequences: rank j receives, from every cp rank, the query heads
// [j·H/cp, (j+1)·H/cp) of that rank's tokens and their key/value heads, and puts the tokens in
// position order; it then runs the ordinary causal attention (ops::attention_forward) over the
// whole sequence for its heads, and sends each rank its tokens' outputs back. Backward exchanges
// q, k, v, the output and its gradient again, runs ops::attention_backward, and returns d(qkv);
// a kv head replicated on several ranks (cp > Hkv) has its gradient summed over them. In bf16
// training (attention_forward_bf16 / _backward_bf16) the heads travel as bf16 and the whole-sequence
// attention is ops::attention_forward_bf16 / _backward_bf16 (a replicated kv head's gradient is
// summed in fp32 and rounded once).
//
// Needs H divisible by cp, and Hkv divisible by cp or cp divisible by Hkv (GQA). lse is kept in
// the whole-sequence layout (B, H/cp, T): the same number of floats as (B, H, T/cp).
//
//   UlyssesAttention a2a(ctx, mesh.cp(), cfg.train.seq_len);
//   Llama model(ctx, cfg, layout, Precision::kBF16, tp, &a2a);  // the model tells it its heads
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "model/context_split.h"
#include "parallel/comm/comm.h"
#include "tensor/exec_context.h"
#include "tensor/tensor.h"

namespace ft {

class UlyssesAttention : public ContextSplit {
 public:
  // ctx: where the buffers live and attention runs (the model's context).
  // dry: transfers only (ContextSplit::dry): the same sends and receives, no buffer, nothing on ctx.
  UlyssesAttention(const ExecContext& ctx, Communicator& cp, int64_t seq_len, bool dry = false);
  // H, Hkv: the heads this rank's attention has (after tensor parallelism); ft::Error when cp
  // cannot split them.
  void use_heads(int64_t H, int64_t Hkv) override;

  void attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t H, int64_t Hkv,
                         int64_t D) override;
  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse,
                          int64_t B, int64_t H, int64_t Hkv, int64_t D) override;
  void attention_forward_bf16(uint16_t* out, float* lse, const uint16_t* qkv, int64_t B, int64_t H, int64_t Hkv,
                              int64_t D) override;
  void attention_backward_bf16(uint16_t* dqkv, const uint16_t* dout, const uint16_t* qkv, const uint16_t* out,
                               const float* lse, int64_t B, int64_t H, int64_t Hkv, int64_t D) override;

 private:
  using Segments = std::vector<std::pair<int64_t, int64_t>>;  // (first column, columns) in elements
  struct Heads {
    int64_t q0, nq, kv0, nkv;
  };
  Heads heads_of(int64_t j) const;
  // The columns of a (H + 2 Hkv)·D qkv row, or of an H·D output row, that rank j attends to.
  Segments qkv_columns(int64_t j, int64_t D) const;
  Segments out_columns(int64_t j, int64_t D) const;
  static int64_t width(const Segments& s);
  // Elements are E: float, or uint16_t (bf16).
  // full (B, T, width(cols(me))) = the columns cols(me) of every rank's local (B, T/cp, ld) rows,
  // at their true positions.
  template <typename E, typename Cols>
  void to_heads(E* full, const E* local, int64_t ld, int64_t B, Cols cols);
  // local (B, T/cp, ld): the columns cols(j) of its rows = (or, add: summed over the ranks that
  // send a column, in fp32) rank j's full rows at this rank's positions.
  template <typename E, typename Cols>
  void from_heads(E* local, int64_t ld, const E* full, int64_t B, Cols cols, bool add);
  // send_[j] (send_n[j] bytes) to rank j, recv_[j] (recv_n[j]) from rank j (this rank's own: a copy);
  // dry: the sizes only, from and into no buffer.
  void exchange(const std::vector<int64_t>& send_n, const std::vector<int64_t>& recv_n);
  // t holding at least n elements E on ctx's device (reallocated when smaller); null when dry.
  template <typename E>
  E* fit(Tensor& t, int64_t n) const;
  // rows rows of cols elements from src (rows src_ld apart) to dst (dst_ld apart), on ctx's device.
  template <typename E>
  void copy_columns(E* dst, int64_t dst_ld, const E* src, int64_t src_ld, int64_t cols, int64_t rows) const;
  // The schedule for either element type (the attention op: the fp32 or the bf16 one).
  template <typename E>
  void forward(E* out, float* lse, const E* qkv, int64_t B, int64_t H, int64_t Hkv, int64_t D);
  template <typename E>
  void backward(E* dqkv, const E* dout, const E* qkv, const E* out, const float* lse, int64_t B, int64_t H, int64_t Hkv,
                int64_t D);

  ExecContext ctx_;
  Communicator& comm_;
  int64_t H_ = 0, Hkv_ = 0;
  std::vector<Tensor> send_, recv_;  // per cp rank
  Tensor qkv_full_, out_full_, dout_full_, dqkv_full_, sum_, wide_;
};

}  // namespace ft

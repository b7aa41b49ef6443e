// Attention of query rows against one block of keys and values, for context parallelism's ring
// (parallel/context_parallel/ring_attention.h): a rank's queries meet the key/value blocks of every
// rank of its cp group one after the other, and the partial results are merged by their
// log-sum-exp. fp32. The op table's attention_block_forward / attention_block_backward
// (kernels/op_decls.inc) are these on the CPU (the forward's `accumulate = false` is
// attention_block_init first; the backward computes its delta), and their _bf16 forms these on
// widened copies (attention_block.cpp); backends/cuda/attention_block.cu on a GPU.
//
// Causality is by true position: query i (at pos_q[i]) sees key j iff pos_k[j] <= pos_q[i]. Both
// position lists ascend, so the keys a query sees are a prefix of the block; a block whose first
// key lies after every query is skipped whole.
//
//   attention_block_init(out, lse, B, Tq, H, D);                    // out = 0, lse = -inf
//   attention_pack_kv(kv, qkv, B, Tk, H, Hkv, D);                   // this rank's block
//   attention_block_forward(out, lse, qkv, kv, pos_q, pos_k, ...);  // once per block, any order
//   attention_block_delta(delta, dout, out, B, Tq, H, D);           // backward: rowsum(dO ∘ O)
//   attention_block_backward(dqkv, dkv, dout, qkv, kv, lse, delta, pos_q, pos_k, ...);
//
// Layouts (ops.h's): qkv (B, Tq, (H + 2 Hkv) D) with the query heads first; kv (B, Tk, 2 Hkv D),
// a block's key heads then value heads; out (B, Tq, H D); lse, delta (B, H, Tq). Query head h
// reads kv head h / (H / Hkv).
#pragma once

#include <cstdint>

namespace ft::cpu {

// out = 0, lse = -inf: no key seen yet.
void attention_block_init(float* out, float* lse, int64_t B, int64_t Tq, int64_t H, int64_t D);
// kv (B, T, 2 Hkv D) = the key and value heads of qkv (B, T, (H + 2 Hkv) D).
void attention_pack_kv(float* kv, const float* qkv, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D);
// The key and value heads of dqkv (B, T, (H + 2 Hkv) D) = dkv (B, T, 2 Hkv D) (written).
void attention_unpack_dkv(float* dqkv, const float* dkv, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D);

// Merges the block's attention into (out, lse): with o, l the softmax-weighted values and the
// log-sum-exp of the scaled scores over the keys of this block a query sees,
//   lse' = log(e^lse + e^l),  out' = (e^lse out + e^l o) / e^lse'.
void attention_block_forward(float* out, float* lse, const float* qkv, const float* kv, const int64_t* pos_q,
                             const int64_t* pos_k, int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv,
                             int64_t D);

// delta (B, H, Tq) = Σ_d dout ∘ out per query row (FlashAttention-2's D).
void attention_block_delta(float* delta, const float* dout, const float* out, int64_t B, int64_t Tq, int64_t H,
                           int64_t D);

// The block's share of the gradients, from the final out's lse and delta: P = exp(S − lse),
// dS = P ∘ (dO Vᵀ − delta); accumulates (+=) dq into the query heads of dqkv (B, Tq, (H + 2 Hkv) D)
// and dk, dv into dkv (B, Tk, 2 Hkv D).
void attention_block_backward(float* dqkv, float* dkv, const float* dout, const float* qkv, const float* kv,
                              const float* lse, const float* delta, const int64_t* pos_q, const int64_t* pos_k,
                              int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv, int64_t D);

}  // namespace ft::cpu

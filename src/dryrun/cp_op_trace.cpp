#include "dryrun/cp_op_trace.h"

#include <fmt/format.h>

#include <string>

#include "backends/trace/op_costs.h"
#include "parallel/context_parallel/ring_attention.h"

namespace ft {

namespace {

constexpr double kBlockF32 = 4;  // bytes of an fp32 element

double dbl(int64_t v) {
  return static_cast<double>(v);
}

// One block of the ring (backends' attention_block kernels, fp32): the rank's Tq queries against a
// block of Tk keys and values, `pairs` of them visible under the causal mask per (sequence, head).
// bf16 (elem 2): q, k, v, out and dout read as bf16, dk and dv written as bf16 (_bf16 ops).
plan::OpRecord block_record(bool backward, int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv, int64_t D,
                            double pairs, bool accumulate, int64_t elem) {
  plan::OpRecord r;
  r.op = std::string(backward ? "attention_block_backward" : "attention_block_forward") + (elem == 2 ? "_bf16" : "");
  r.shape = fmt::format("B={} T={} H={} Hkv={} D={} Tk={}", B, Tq, H, Hkv, D, Tk);
  r.kind = plan::OpKind::kFlashFp32;
  const double q = dbl(B * Tq * H * D), kv = dbl(B * Tk * 2 * Hkv * D), stats = dbl(B * H * Tq);
  const double e = dbl(elem);
  if (!backward) {  // q and the block read; out and lse written (and read when merged into)
    r.bytes_read = e * (q + kv) + kBlockF32 * (accumulate ? q + stats : 0);
    r.bytes_written = kBlockF32 * (q + stats);
  } else {  // delta, dQ (3 products), dK/dV (4 products): q, out, dout, dq, the block, lse, delta
    r.bytes_read = e * (3 * q + 2 * kv) + kBlockF32 * (q + 2 * stats);
    r.bytes_written = kBlockF32 * (q + stats) + e * kv;
    r.kernels = 3;
  }
  // q kᵀ and P v over the visible pairs (forward); backward 14 per pair and dimension; the shape
  // names the pairs, as the timed CPU's record of the same block does (a profile matches them).
  trace::cost::set_block_pairs(r, pairs, B, H, D);
  return r;
}

}  // namespace

CpOpRecorder::CpOpRecorder(ContextSplit& inner, CpAttention schedule)
    : ContextSplit(inner.size(), inner.rank(), inner.seq_len(), /*dry=*/true), inner_(inner), schedule_(schedule) {}

double CpOpRecorder::causal_pairs(int64_t T, int64_t cp, int64_t q_rank, int64_t k_rank) {
  const int64_t c = T / (2 * cp);
  const int64_t q_chunks[] = {q_rank, 2 * cp - 1 - q_rank}, k_chunks[] = {k_rank, 2 * cp - 1 - k_rank};
  double pairs = 0;
  for (int64_t qc : q_chunks)
    for (int64_t kc : k_chunks) pairs += kc < qc ? dbl(c * c) : kc == qc ? dbl(c * (c + 1) / 2) : 0.0;
  return pairs;
}

void CpOpRecorder::record_forward(int64_t B, int64_t H, int64_t Hkv, int64_t D, int64_t elem) {
  const int64_t T = local_tokens(), cp = size();
  if (schedule_ == CpAttention::kAllToAll) {
    const int64_t nq = H / cp, nkv = Hkv % cp == 0 ? Hkv / cp : 1;
    ops_.push_back(elem == 2 ? trace::cost::attention_forward_bf16(nullptr, nullptr, nullptr, B, seq_len(), nq, nkv, D)
                             : trace::cost::attention_forward(nullptr, nullptr, nullptr, B, seq_len(), nq, nkv, D));
    return;
  }
  for (int64_t s = 0; s < cp; ++s) {
    const int64_t owner = (rank() - s + cp) % cp;
    plan::OpRecord r = block_record(false, B, T, T, H, Hkv, D, causal_pairs(seq_len(), cp, rank(), owner), s > 0, elem);
    if (s + 1 < cp) r.overlapped_send_bytes = dbl(RingAttention::block_bytes(B, T, Hkv, D, elem));  // the next block's
    ops_.push_back(std::move(r));
  }
}

void CpOpRecorder::record_backward(int64_t B, int64_t H, int64_t Hkv, int64_t D, int64_t elem) {
  const int64_t T = local_tokens(), cp = size();
  if (schedule_ == CpAttention::kAllToAll) {
    const int64_t nq = H / cp, nkv = Hkv % cp == 0 ? Hkv / cp : 1;
    ops_.push_back(elem == 2 ? trace::cost::attention_backward_bf16(nullptr, nullptr, nullptr, nullptr, nullptr, B,
                                                                    seq_len(), nq, nkv, D)
                             : trace::cost::attention_backward(nullptr, nullptr, nullptr, nullptr, nullptr, B,
                                                               seq_len(), nq, nkv, D));
    return;
  }
  for (int64_t s = 0; s < cp; ++s) {
    const int64_t owner = (rank() - s + cp) % cp;
    plan::OpRecord r = block_record(true, B, T, T, H, Hkv, D, causal_pairs(seq_len(), cp, rank(), owner), true, elem);
    if (s + 1 < cp) r.overlapped_send_bytes = dbl(RingAttention::block_bytes(B, T, Hkv, D, elem));
    ops_.push_back(std::move(r));
  }
}

void CpOpRecorder::attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t H, int64_t Hkv,
                                     int64_t D) {
  inner_.attention_forward(out, lse, qkv, B, H, Hkv, D);
  record_forward(B, H, Hkv, D, 4);
}

void CpOpRecorder::attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                                      const float* lse, int64_t B, int64_t H, int64_t Hkv, int64_t D) {
  inner_.attention_backward(dqkv, dout, qkv, out, lse, B, H, Hkv, D);
  record_backward(B, H, Hkv, D, 4);
}

void CpOpRecorder::attention_forward_bf16(uint16_t* out, float* lse, const uint16_t* qkv, int64_t B, int64_t H,
                                          int64_t Hkv, int64_t D) {
  inner_.attention_forward_bf16(out, lse, qkv, B, H, Hkv, D);
  record_forward(B, H, Hkv, D, 2);
}

void CpOpRecorder::attention_backward_bf16(uint16_t* dqkv, const uint16_t* dout, const uint16_t* qkv,
                                           const uint16_t* out, const float* lse, int64_t B, int64_t H, int64_t Hkv,
                                           int64_t D) {
  inner_.attention_backward_bf16(dqkv, dout, qkv, out, lse, B, H, Hkv, D);
  record_backward(B, H, Hkv, D, 2);
}

std::vector<plan::OpRecord> CpOpRecorder::take() {
  std::vector<plan::OpRecord> out = std::move(ops_);
  ops_.clear();
  return out;
}

}  // namespace ft

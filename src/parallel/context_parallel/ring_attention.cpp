#include "parallel/context_parallel/ring_attention.h"

#include "backends/cpu/attention_block.h"
#include "tensor/memory.h"
#include "util/error.h"

namespace ft {

namespace {
// Tags of the ring's transfers: a block's keys and values in forward and in backward, its dk, dv.
constexpr int kTagKvForward = 3301, kTagKvBackward = 3302, kTagDkv = 3303;
}  // namespace

RingAttention::RingAttention(Communicator& cp, int64_t seq_len, bool dry)
    : ContextSplit(cp.size(), cp.rank(), seq_len, dry), comm_(cp) {
  FT_CHECK(seq_len % (2 * size()) == 0, "ring attention: seq_len {} is not a multiple of 2 x cp = {}", seq_len,
           2 * size());
  for (int64_t r = 0; r < size(); ++r) positions_.push_back(zigzag_positions(seq_len, size(), r));
}

void RingAttention::reserve(int64_t B, int64_t Hkv, int64_t D, bool backward) {
  if (dry()) return;
  const size_t n = static_cast<size_t>(B * local_tokens() * 2 * Hkv * D);
  for (auto& b : kv_) b.resize(n);
  if (backward)
    for (auto& b : dkv_) b.resize(n);
}

void RingAttention::attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t H, int64_t Hkv,
                                      int64_t D) {
  const int64_t T = local_tokens(), cp = size();
  reserve(B, Hkv, D, false);
  const int64_t bytes = block_bytes(B, T, Hkv, D);
  const bool compute = !dry();
  if (compute) {
    cpu::attention_pack_kv(kv_[0].data(), qkv, B, T, H, Hkv, D);
    cpu::attention_block_init(out, lse, B, T, H, D);
  }
  int cur = 0;
  for (int64_t s = 0; s < cp; ++s) {
    const int64_t owner = (rank() - s + cp) % cp;  // whose block is in hand
    WorkPtr recv, send;
    if (s + 1 < cp) {  // the next block arrives while this one is used
      recv = comm_.recv_async(at(kv_[1 - cur]), bytes, prev(), kTagKvForward);
      send = comm_.send_async(at(kv_[cur]), bytes, next(), kTagKvForward);
    }
    if (compute)
      cpu::attention_block_forward(out, lse, qkv, kv_[cur].data(), positions_of(rank()), positions_of(owner), B, T, T,
                                   H, Hkv, D);
    if (s + 1 < cp) {
      send->wait();
      recv->wait();
      cur = 1 - cur;
    }
  }
}

void RingAttention::attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                                       const float* lse, int64_t B, int64_t H, int64_t Hkv, int64_t D) {
  const int64_t T = local_tokens(), cp = size();
  reserve(B, Hkv, D, true);
  const int64_t bytes = block_bytes(B, T, Hkv, D);
  const bool compute = !dry();
  if (compute) {
    delta_.resize(static_cast<size_t>(B * H * T));
    cpu::attention_block_delta(delta_.data(), dout, out, B, T, H, D);
    const ExecContext& host = cpu_context();
    mem_zero(host, dqkv, Device::kCPU, static_cast<size_t>(B * T * (H + 2 * Hkv) * D) * sizeof(float));  // dq: +=
    cpu::attention_pack_kv(kv_[0].data(), qkv, B, T, H, Hkv, D);
    mem_zero(host, dkv_[0].data(), Device::kCPU, dkv_[0].size() * sizeof(float));
  }
  int cur = 0;
  for (int64_t s = 0; s < cp; ++s) {
    const int64_t owner = (rank() - s + cp) % cp;
    WorkPtr recv, send;
    if (s + 1 < cp) {
      recv = comm_.recv_async(at(kv_[1 - cur]), bytes, prev(), kTagKvBackward);
      send = comm_.send_async(at(kv_[cur]), bytes, next(), kTagKvBackward);
    }
    if (compute)
      cpu::attention_block_backward(dqkv, dkv_[cur].data(), dout, qkv, kv_[cur].data(), lse, delta_.data(),
                                    positions_of(rank()), positions_of(owner), B, T, T, H, Hkv, D);
    // The block's dk, dv so far go on with it (after the last step: home to their owner).
    WorkPtr drecv = comm_.recv_async(at(dkv_[1 - cur]), bytes, prev(), kTagDkv);
    WorkPtr dsend = comm_.send_async(at(dkv_[cur]), bytes, next(), kTagDkv);
    dsend->wait();
    drecv->wait();
    if (s + 1 < cp) {
      send->wait();
      recv->wait();
    }
    cur = 1 - cur;
  }
  // kv_[cur] is stale here, dkv_[cur] is this rank's own block's dk, dv from every rank.
  if (compute) cpu::attention_unpack_dkv(dqkv, dkv_[cur].data(), B, T, H, Hkv, D);
}

}  // namespace ft

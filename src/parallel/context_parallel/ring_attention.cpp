#include "parallel/context_parallel/ring_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/attention_block.h"
#include "tensor/memory.h"
#include "util/clock.h"
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
    const double t0 = now_seconds();
    if (compute)
      cpu::attention_block_forward(out, lse, qkv, kv_[cur].data(), positions_of(rank()), positions_of(owner), B, T, T,
                                   H, Hkv, D);
    if (s + 1 < cp) {
      const double t1 = now_seconds();
      send->wait();
      recv->wait();
      cur = 1 - cur;
      overlap_.transfers += 1;
      overlap_.compute_s += t1 - t0;
      overlap_.wait_s += now_seconds() - t1;
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
    const double t0 = now_seconds();
    if (compute)
      cpu::attention_block_backward(dqkv, dkv_[cur].data(), dout, qkv, kv_[cur].data(), lse, delta_.data(),
                                    positions_of(rank()), positions_of(owner), B, T, T, H, Hkv, D);
    // The block's dk, dv so far go on with it (after the last step: home to their owner).
    const double t1 = now_seconds();
    WorkPtr drecv = comm_.recv_async(at(dkv_[1 - cur]), bytes, prev(), kTagDkv);
    WorkPtr dsend = comm_.send_async(at(dkv_[cur]), bytes, next(), kTagDkv);
    dsend->wait();
    drecv->wait();
    const double t2 = now_seconds();
    overlap_.hops += 1;
    overlap_.hop_s += t2 - t1;
    if (s + 1 < cp) {
      send->wait();
      recv->wait();
      overlap_.transfers += 1;
      overlap_.compute_s += t1 - t0;
      overlap_.wait_s += now_seconds() - t2;
    }
    cur = 1 - cur;
  }
  // kv_[cur] is stale here, dkv_[cur] is this rank's own block's dk, dv from every rank.
  if (compute) cpu::attention_unpack_dkv(dqkv, dkv_[cur].data(), B, T, H, Hkv, D);
}

double RingAttention::Overlap::hidden_share() const {
  if (hops == 0 || transfers == 0) return std::numeric_limits<double>::quiet_NaN();
  const double alone = static_cast<double>(transfers) * hop_s / static_cast<double>(hops);
  return alone > 0 ? std::clamp(1.0 - wait_s / alone, 0.0, 1.0) : 1.0;
}

std::string RingAttention::describe_overlap() const {
  const Overlap& o = overlap_;
  return fmt::format(
      "ring attention overlap: {} key/value transfers overlapped {:.3f} s of block compute and waited {:.3f} s after "
      "it; {} blocking dk/dv hops of the same size took {:.3f} s ({:.2f} ms each); hidden share of the overlapped "
      "transfers {:.2f}",
      o.transfers, o.compute_s, o.wait_s, o.hops, o.hop_s, o.hops ? 1e3 * o.hop_s / static_cast<double>(o.hops) : 0.0,
      o.hidden_share());
}

}  // namespace ft

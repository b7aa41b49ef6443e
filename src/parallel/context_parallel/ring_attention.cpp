#include "parallel/context_parallel/ring_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/ops.h"
#include "util/error.h"

namespace ft {

namespace {
// Tags of the ring's transfers: a block's keys and values in forward and in backward, its dk, dv.
// NCCL matches transfers by order, not tag: the tag's parity picks the link's channel (nccl_comm.h),
// so backward's blocks (even) and their dk, dv (odd) travel on two streams.
constexpr int kTagKvForward = 3301, kTagKvBackward = 3302, kTagDkv = 3303;
}  // namespace

RingAttention::RingAttention(const ExecContext& ctx, Communicator& cp, int64_t seq_len, bool dry)
    : ContextSplit(cp.size(), cp.rank(), seq_len, dry),
      ctx_(ctx),
      comm_(cp),
      compute_timer_(ctx),
      wait_timer_(ctx),
      hop_timer_(ctx) {
  FT_CHECK(seq_len % (2 * size()) == 0, "ring attention: seq_len {} is not a multiple of 2 x cp = {}", seq_len,
           2 * size());
  const int64_t T = local_tokens();
  for (int64_t r = 0; r < size(); ++r)
    for (int64_t p : zigzag_positions(seq_len, size(), r)) host_positions_.push_back(static_cast<int32_t>(p));
  if (dry) return;  // nothing on ctx's device
  positions_ = Tensor::empty({size(), T}, DType::kI32, MemCategory::kCommunication, ctx_.device);
  mem_copy(ctx_, positions_.data<int32_t>(), ctx_.device, host_positions_.data(), Device::kCPU,
           host_positions_.size() * sizeof(int32_t));
}

const int32_t* RingAttention::positions_of(int64_t owner) const {
  return positions_.defined() ? positions_.data<int32_t>() + owner * local_tokens() : nullptr;
}

void* RingAttention::fit(Tensor& t, int64_t bytes, MemCategory cat) const {
  if (dry()) return nullptr;
  const int64_t n = (bytes + 3) / 4;  // held as fp32 words
  if (!t.defined() || t.numel() < n) t = Tensor::empty({std::max<int64_t>(n, 1)}, DType::kF32, cat, ctx_.device);
  return t.data<float>();
}

void RingAttention::reserve(int64_t B, int64_t Hkv, int64_t D, bool backward, int64_t elem) {
  const int64_t bytes = block_bytes(B, local_tokens(), Hkv, D, elem);
  for (auto& b : kv_) fit(b, bytes, MemCategory::kCommunication);
  if (backward)
    for (auto& b : dkv_) fit(b, bytes, MemCategory::kCommunication);
}

void RingAttention::pack_kv(void* kv, const void* qkv, int64_t B, int64_t H, int64_t Hkv, int64_t D,
                            int64_t elem) const {
  const auto row = static_cast<size_t>((H + 2 * Hkv) * D * elem), n = static_cast<size_t>(2 * Hkv * D * elem);
  mem_copy_2d(ctx_, kv, ctx_.device, n, static_cast<const char*>(qkv) + H * D * elem, ctx_.device, row, n,
              static_cast<size_t>(B * local_tokens()));
}

void RingAttention::unpack_dkv(void* dqkv, const void* dkv, int64_t B, int64_t H, int64_t Hkv, int64_t D,
                               int64_t elem) const {
  const auto row = static_cast<size_t>((H + 2 * Hkv) * D * elem), n = static_cast<size_t>(2 * Hkv * D * elem);
  mem_copy_2d(ctx_, static_cast<char*>(dqkv) + H * D * elem, ctx_.device, row, dkv, ctx_.device, n, n,
              static_cast<size_t>(B * local_tokens()));
}

template <typename Block>
void RingAttention::ring_forward(const void* qkv, int64_t B, int64_t H, int64_t Hkv, int64_t D, int64_t elem,
                                 Block block) {
  const int64_t T = local_tokens(), cp = size();
  reserve(B, Hkv, D, false, elem);
  // Dry: the same transfers, of the same sizes, from no buffer; nothing computed.
  const int64_t bytes = block_bytes(B, T, Hkv, D, elem);
  const bool compute = !dry();
  void* kv[2] = {at(kv_[0]), at(kv_[1])};
  if (compute) pack_kv(kv[0], qkv, B, H, Hkv, D, elem);
  int cur = 0;
  for (int64_t s = 0; s < cp; ++s) {
    const int64_t owner = (rank() - s + cp) % cp;  // whose block is in hand
    WorkPtr recv, send;
    if (s + 1 < cp) {  // the next block arrives while this one is used
      recv = comm_.recv_async(kv[1 - cur], bytes, prev(), kTagKvForward);
      send = comm_.send_async(kv[cur], bytes, next(), kTagKvForward);
    }
    // The own block first: every query sees its own key, so step 0 writes out and lse whole.
    if (compute && s + 1 < cp) compute_timer_.begin();
    if (compute) block(kv[cur], owner, s > 0);
    if (s + 1 < cp) {  // later compute waits for both (the host does not, on a device)
      if (compute) {
        compute_timer_.end();
        wait_timer_.begin();
      }
      send->stream_wait(ctx_);
      recv->stream_wait(ctx_);
      if (compute) wait_timer_.end();
      cur = 1 - cur;
      overlap_.transfers += compute ? 1 : 0;
    }
  }
}

template <typename Block>
void* RingAttention::ring_backward(const void* qkv, int64_t B, int64_t H, int64_t Hkv, int64_t D, int64_t elem,
                                   Block block) {
  const int64_t T = local_tokens(), cp = size();
  reserve(B, Hkv, D, true, elem);
  const int64_t bytes = block_bytes(B, T, Hkv, D, elem);
  const bool compute = !dry();
  void* kv[2] = {at(kv_[0]), at(kv_[1])};
  void* dkv[2] = {at(dkv_[0]), at(dkv_[1])};
  if (compute) {
    pack_kv(kv[0], qkv, B, H, Hkv, D, elem);
    mem_zero(ctx_, dkv[0], ctx_.device, static_cast<size_t>(bytes));
  }
  int cur = 0;
  for (int64_t s = 0; s < cp; ++s) {
    const int64_t owner = (rank() - s + cp) % cp;
    WorkPtr recv, send;
    if (s + 1 < cp) {
      recv = comm_.recv_async(kv[1 - cur], bytes, prev(), kTagKvBackward);
      send = comm_.send_async(kv[cur], bytes, next(), kTagKvBackward);
    }
    if (compute && s + 1 < cp) compute_timer_.begin();
    if (compute) block(dkv[cur], kv[cur], owner);
    // The block's dk, dv so far go on with it (after the last step: home to their owner).
    if (compute && s + 1 < cp) compute_timer_.end();
    if (compute) hop_timer_.begin();
    WorkPtr drecv = comm_.recv_async(dkv[1 - cur], bytes, prev(), kTagDkv);
    WorkPtr dsend = comm_.send_async(dkv[cur], bytes, next(), kTagDkv);
    dsend->stream_wait(ctx_);
    drecv->stream_wait(ctx_);
    if (compute) {
      hop_timer_.end();
      overlap_.hops += 1;
    }
    if (s + 1 < cp) {
      if (compute) wait_timer_.begin();
      send->stream_wait(ctx_);
      recv->stream_wait(ctx_);
      if (compute) wait_timer_.end();
      overlap_.transfers += compute ? 1 : 0;
    }
    cur = 1 - cur;
  }
  // kv[cur] is stale here, dkv[cur] is this rank's own block's dk, dv from every rank.
  return dkv[cur];
}

void RingAttention::attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t H, int64_t Hkv,
                                      int64_t D) {
  const int64_t T = local_tokens();
  ring_forward(qkv, B, H, Hkv, D, sizeof(float), [&](const void* kv, int64_t owner, bool accumulate) {
    ops::attention_block_forward(ctx_, out, lse, qkv, static_cast<const float*>(kv), positions_of(rank()),
                                 positions_of(owner), B, T, T, H, Hkv, D, accumulate);
  });
}

void RingAttention::attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                                       const float* lse, int64_t B, int64_t H, int64_t Hkv, int64_t D) {
  const int64_t T = local_tokens();
  if (!dry())  // dq: +=
    mem_zero(ctx_, dqkv, ctx_.device, static_cast<size_t>(B * T * (H + 2 * Hkv) * D) * sizeof(float));
  void* dkv = ring_backward(qkv, B, H, Hkv, D, sizeof(float), [&](void* dkv, const void* kv, int64_t owner) {
    ops::attention_block_backward(ctx_, dqkv, static_cast<float*>(dkv), dout, qkv, static_cast<const float*>(kv), out,
                                  lse, positions_of(rank()), positions_of(owner), B, T, T, H, Hkv, D);
  });
  if (!dry()) unpack_dkv(dqkv, dkv, B, H, Hkv, D, sizeof(float));  // into the key and value heads
}

// bf16: the blocks travel as bf16; the merged output and dq are fp32 here, rounded once at the end.
void RingAttention::attention_forward_bf16(uint16_t* out, float* lse, const uint16_t* qkv, int64_t B, int64_t H,
                                           int64_t Hkv, int64_t D) {
  const int64_t T = local_tokens(), n_out = B * T * H * D;
  auto* out32 = static_cast<float*>(fit(out32_, n_out * 4, MemCategory::kWorkspace));
  ring_forward(qkv, B, H, Hkv, D, 2, [&](const void* kv, int64_t owner, bool accumulate) {
    ops::attention_block_forward_bf16(ctx_, out32, lse, qkv, static_cast<const uint16_t*>(kv), positions_of(rank()),
                                      positions_of(owner), B, T, T, H, Hkv, D, accumulate);
  });
  if (!dry()) ops::to_bf16(ctx_, out, out32, n_out);
}

void RingAttention::attention_backward_bf16(uint16_t* dqkv, const uint16_t* dout, const uint16_t* qkv,
                                            const uint16_t* out, const float* lse, int64_t B, int64_t H, int64_t Hkv,
                                            int64_t D) {
  const int64_t T = local_tokens(), n = B * T * (H + 2 * Hkv) * D;
  auto* dq32 = static_cast<float*>(fit(dqkv32_, n * 4, MemCategory::kWorkspace));
  if (!dry()) mem_zero(ctx_, dq32, ctx_.device, static_cast<size_t>(n) * sizeof(float));
  void* dkv = ring_backward(qkv, B, H, Hkv, D, 2, [&](void* dkv, const void* kv, int64_t owner) {
    ops::attention_block_backward_bf16(ctx_, dq32, static_cast<uint16_t*>(dkv), dout, qkv,
                                       static_cast<const uint16_t*>(kv), out, lse, positions_of(rank()),
                                       positions_of(owner), B, T, T, H, Hkv, D);
  });
  if (dry()) return;
  ops::to_bf16(ctx_, dqkv, dq32, n);       // the query heads (the key and value heads of dq32 are 0)
  unpack_dkv(dqkv, dkv, B, H, Hkv, D, 2);  // the key and value heads
}

double RingAttention::Overlap::hidden_share() const {
  if (hops == 0 || transfers == 0) return std::numeric_limits<double>::quiet_NaN();
  const double alone = static_cast<double>(transfers) * hop_s / static_cast<double>(hops);
  return alone > 0 ? std::clamp(1.0 - wait_s / alone, 0.0, 1.0) : 1.0;
}

void RingAttention::settle_overlap() {
  overlap_.compute_s += compute_timer_.seconds();
  overlap_.wait_s += wait_timer_.seconds();
  overlap_.hop_s += hop_timer_.seconds();
  for (StreamTimer* t : {&compute_timer_, &wait_timer_, &hop_timer_}) t->restart();
}

std::string RingAttention::describe_overlap() {
  settle_overlap();
  const Overlap& o = overlap_;
  return fmt::format(
      "ring attention overlap: {} key/value transfers overlapped {:.3f} s of block compute and waited {:.3f} s after "
      "it; {} blocking dk/dv hops of the same size took {:.3f} s ({:.2f} ms each); hidden share of the overlapped "
      "transfers {:.2f}",
      o.transfers, o.compute_s, o.wait_s, o.hops, o.hop_s, o.hops ? 1e3 * o.hop_s / static_cast<double>(o.hops) : 0.0,
      o.hidden_share());
}

}  // namespace ft

#include "parallel/context_parallel/ulysses_attention.h"

#include <algorithm>
#include <type_traits>

#include "kernels/ops.h"
#include "util/error.h"

namespace ft {

namespace {
constexpr int kTagA2A = 3311;
}  // namespace

UlyssesAttention::UlyssesAttention(const ExecContext& ctx, Communicator& cp, int64_t seq_len, bool dry)
    : ContextSplit(cp.size(), cp.rank(), seq_len, dry), ctx_(ctx), comm_(cp) {
  const int64_t n = size();
  FT_CHECK(seq_len % (2 * n) == 0, "all-to-all attention: seq_len {} is not a multiple of 2 x cp = {}", seq_len, 2 * n);
  send_.resize(static_cast<size_t>(n));
  recv_.resize(static_cast<size_t>(n));
}

void UlyssesAttention::use_heads(int64_t H, int64_t Hkv) {
  const int64_t n = size();
  H_ = H, Hkv_ = Hkv;
  if (H % n != 0 || (Hkv % n != 0 && n % Hkv != 0))
    throw Error(fmt::format("parallel.cp_attention = \"all_to_all\" scatters the attention heads over parallel.cp = "
                            "{} ranks, but a rank has {} query heads and {} key/value heads",
                            n, H, Hkv),
                "use a cp that divides the query heads and divides (or is a multiple of) the key/value heads, or "
                "parallel.cp_attention = \"ring\"");
}

UlyssesAttention::Heads UlyssesAttention::heads_of(int64_t j) const {
  const int64_t nq = H_ / size(), q0 = j * nq;
  if (Hkv_ % size() == 0) return {q0, nq, j * (Hkv_ / size()), Hkv_ / size()};
  return {q0, nq, q0 / (H_ / Hkv_), 1};  // the one kv head of this rank's query heads (replicated)
}

UlyssesAttention::Segments UlyssesAttention::qkv_columns(int64_t j, int64_t D) const {
  const Heads h = heads_of(j);
  return {{h.q0 * D, h.nq * D}, {(H_ + h.kv0) * D, h.nkv * D}, {(H_ + Hkv_ + h.kv0) * D, h.nkv * D}};
}

UlyssesAttention::Segments UlyssesAttention::out_columns(int64_t j, int64_t D) const {
  const Heads h = heads_of(j);
  return {{h.q0 * D, h.nq * D}};
}

int64_t UlyssesAttention::width(const Segments& s) {
  int64_t w = 0;
  for (auto [c0, n] : s) w += n;
  return w;
}

template <typename E>
E* UlyssesAttention::fit(Tensor& t, int64_t n) const {
  if (dry()) return nullptr;
  const int64_t words = (n * static_cast<int64_t>(sizeof(E)) + 3) / 4;  // held as fp32 words
  if (!t.defined() || t.numel() < words)
    t = Tensor::empty({std::max<int64_t>(words, 1)}, DType::kF32, MemCategory::kCommunication, ctx_.device);
  return reinterpret_cast<E*>(t.data<float>());
}

template <typename E>
void UlyssesAttention::copy_columns(E* dst, int64_t dst_ld, const E* src, int64_t src_ld, int64_t cols,
                                    int64_t rows) const {
  if (rows == 0 || cols == 0) return;
  constexpr size_t e = sizeof(E);
  mem_copy_2d(ctx_, dst, ctx_.device, static_cast<size_t>(dst_ld) * e, src, ctx_.device,
              static_cast<size_t>(src_ld) * e, static_cast<size_t>(cols) * e, static_cast<size_t>(rows));
}

void UlyssesAttention::exchange(const std::vector<int64_t>& send_n, const std::vector<int64_t>& recv_n) {
  // Rounds k = 0 .. cp − 1 pair rank r with (k − r) mod cp (an involution: every round is a set of
  // disjoint pairs; a rank paired with itself sits out). In a pair the lower rank sends first. Every
  // rank posts its transfers in the same round order, so a transport that runs a group's transfers
  // in posting order on one stream (NCCL: no tags) never waits in a cycle.
  std::vector<WorkPtr> works;
  const int64_t n = size(), me = rank();
  auto data = [](Tensor& t) { return t.defined() ? t.data<float>() : nullptr; };  // null when dry
  for (int64_t k = 0; k < n; ++k) {
    const int64_t p = ((k - me) % n + n) % n;
    if (p == me) continue;
    const auto j = static_cast<size_t>(p);
    const auto peer = static_cast<int>(p);
    auto post_send = [&] { works.push_back(comm_.send_async(data(send_[j]), send_n[j], peer, kTagA2A)); };
    auto post_recv = [&] { works.push_back(comm_.recv_async(data(recv_[j]), recv_n[j], peer, kTagA2A)); };
    if (me < p) {
      post_send();
      post_recv();
    } else {
      post_recv();
      post_send();
    }
  }
  const auto m = static_cast<size_t>(me);
  if (!dry())
    mem_copy(ctx_, recv_[m].data<float>(), ctx_.device, send_[m].data<float>(), ctx_.device,
             static_cast<size_t>(send_n[m]));
  for (auto& w : works) w->stream_wait(ctx_);
}

template <typename E, typename Cols>
void UlyssesAttention::to_heads(E* full, const E* local, int64_t ld, int64_t B, Cols cols) {
  const int64_t T = local_tokens(), S = seq_len(), w = width(cols(rank())), n = size(), e = sizeof(E);
  std::vector<int64_t> send_n(static_cast<size_t>(n)), recv_n(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {  // to rank j: its columns of this rank's tokens
    const Segments seg = cols(j);
    const int64_t wj = width(seg);
    E* s = fit<E>(send_[static_cast<size_t>(j)], B * T * wj);
    int64_t at = 0;
    if (!dry())
      for (auto [c0, c] : seg) {
        copy_columns(s + at, wj, local + c0, ld, c, B * T);
        at += c;
      }
    send_n[static_cast<size_t>(j)] = B * T * wj * e;
    recv_n[static_cast<size_t>(j)] = B * T * w * e;
    fit<E>(recv_[static_cast<size_t>(j)], B * T * w);
  }
  exchange(send_n, recv_n);
  if (dry()) return;
  for (int64_t src = 0; src < n; ++src) {  // rank src's chunks, at their positions: B rows each
    const E* in = reinterpret_cast<const E*>(recv_[static_cast<size_t>(src)].data<float>());
    int64_t t0 = 0;
    for (auto [p0, p1] : zigzag_ranges(S, n, src)) {
      copy_columns(full + p0 * w, S * w, in + t0 * w, T * w, (p1 - p0) * w, B);
      t0 += p1 - p0;
    }
  }
}

template <typename E, typename Cols>
void UlyssesAttention::from_heads(E* local, int64_t ld, const E* full, int64_t B, Cols cols, bool add) {
  const int64_t T = local_tokens(), S = seq_len(), w = width(cols(rank())), n = size(), e = sizeof(E);
  std::vector<int64_t> send_n(static_cast<size_t>(n)), recv_n(static_cast<size_t>(n));
  for (int64_t dst = 0; dst < n; ++dst) {  // to rank dst: this rank's columns of its tokens
    E* s = fit<E>(send_[static_cast<size_t>(dst)], B * T * w);
    int64_t t0 = 0;
    if (!dry())
      for (auto [p0, p1] : zigzag_ranges(S, n, dst)) {
        copy_columns(s + t0 * w, T * w, full + p0 * w, S * w, (p1 - p0) * w, B);
        t0 += p1 - p0;
      }
    const int64_t wd = width(cols(dst));
    send_n[static_cast<size_t>(dst)] = B * T * w * e;
    recv_n[static_cast<size_t>(dst)] = B * T * wd * e;
    fit<E>(recv_[static_cast<size_t>(dst)], B * T * wd);
  }
  exchange(send_n, recv_n);
  if (dry()) return;
  // Columns several ranks send (replicated kv heads, cp > Hkv) are summed: each rank's into a zeroed
  // scratch row block, then added (in fp32: bf16 rows are widened, summed, rounded once). Otherwise
  // every column comes from one rank: copied in place.
  constexpr bool wide = !std::is_same_v<E, float>;
  const bool overlap = add && Hkv_ % n != 0;
  const int64_t m = B * T * ld;
  E* scratch = overlap ? fit<E>(sum_, m) : nullptr;
  float* acc = overlap && wide ? fit<float>(wide_, 2 * m) : nullptr;  // the sum, and a widened row block
  float* sum = wide ? acc : reinterpret_cast<float*>(local);
  if (overlap) mem_zero(ctx_, sum, ctx_.device, static_cast<size_t>(m) * sizeof(float));
  for (int64_t j = 0; j < n; ++j) {  // rank j's columns of this rank's tokens
    const Segments seg = cols(j);
    const int64_t wj = width(seg);
    const E* in = reinterpret_cast<const E*>(recv_[static_cast<size_t>(j)].data<float>());
    E* dst = overlap ? scratch : local;
    if (overlap) mem_zero(ctx_, scratch, ctx_.device, static_cast<size_t>(m) * e);
    int64_t at = 0;
    for (auto [c0, c] : seg) {
      copy_columns(dst + c0, ld, in + at, wj, c, B * T);
      at += c;
    }
    if (!overlap) continue;
    if constexpr (wide) {
      ops::from_bf16(ctx_, acc + m, scratch, m);
      ops::add_inplace(ctx_, acc, acc + m, m);
    } else {
      ops::add_inplace(ctx_, local, scratch, m);
    }
  }
  if constexpr (wide)
    if (overlap) ops::to_bf16(ctx_, local, acc, m);
}

template <typename E>
void UlyssesAttention::forward(E* out, float* lse, const E* qkv, int64_t B, int64_t H, int64_t Hkv, int64_t D) {
  FT_CHECK(H == H_ && Hkv == Hkv_, "all-to-all attention built for {} / {} heads, called with {} / {}", H_, Hkv_, H,
           Hkv);
  const Heads me = heads_of(rank());
  const int64_t S = seq_len();
  auto qcols = [&](int64_t j) { return qkv_columns(j, D); };
  auto ocols = [&](int64_t j) { return out_columns(j, D); };
  E* qkv_full = fit<E>(qkv_full_, B * S * (me.nq + 2 * me.nkv) * D);
  E* out_full = fit<E>(out_full_, B * S * me.nq * D);
  to_heads(qkv_full, qkv, (H + 2 * Hkv) * D, B, qcols);
  if (!dry()) {
    if constexpr (std::is_same_v<E, float>)
      ops::attention_forward(ctx_, out_full, lse, qkv_full, B, S, me.nq, me.nkv, D);
    else
      ops::attention_forward_bf16(ctx_, out_full, lse, qkv_full, B, S, me.nq, me.nkv, D);
  }
  from_heads(out, H * D, static_cast<const E*>(out_full), B, ocols, false);
}

template <typename E>
void UlyssesAttention::backward(E* dqkv, const E* dout, const E* qkv, const E* out, const float* lse, int64_t B,
                                int64_t H, int64_t Hkv, int64_t D) {
  const Heads me = heads_of(rank());
  const int64_t S = seq_len();
  auto qcols = [&](int64_t j) { return qkv_columns(j, D); };
  auto ocols = [&](int64_t j) { return out_columns(j, D); };
  E* qkv_full = fit<E>(qkv_full_, B * S * (me.nq + 2 * me.nkv) * D);
  E* out_full = fit<E>(out_full_, B * S * me.nq * D);
  E* dout_full = fit<E>(dout_full_, B * S * me.nq * D);
  E* dqkv_full = fit<E>(dqkv_full_, B * S * (me.nq + 2 * me.nkv) * D);
  to_heads(qkv_full, qkv, (H + 2 * Hkv) * D, B, qcols);
  to_heads(out_full, out, H * D, B, ocols);
  to_heads(dout_full, dout, H * D, B, ocols);
  if (!dry()) {
    if constexpr (std::is_same_v<E, float>)
      ops::attention_backward(ctx_, dqkv_full, dout_full, qkv_full, out_full, lse, B, S, me.nq, me.nkv, D);
    else
      ops::attention_backward_bf16(ctx_, dqkv_full, dout_full, qkv_full, out_full, lse, B, S, me.nq, me.nkv, D);
  }
  // Replicated kv heads (cp > Hkv) get a gradient from each of their ranks: summed.
  from_heads(dqkv, (H + 2 * Hkv) * D, static_cast<const E*>(dqkv_full), B, qcols, true);
}

void UlyssesAttention::attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t H, int64_t Hkv,
                                         int64_t D) {
  forward(out, lse, qkv, B, H, Hkv, D);
}
void UlyssesAttention::attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                                          const float* lse, int64_t B, int64_t H, int64_t Hkv, int64_t D) {
  backward(dqkv, dout, qkv, out, lse, B, H, Hkv, D);
}
void UlyssesAttention::attention_forward_bf16(uint16_t* out, float* lse, const uint16_t* qkv, int64_t B, int64_t H,
                                              int64_t Hkv, int64_t D) {
  forward(out, lse, qkv, B, H, Hkv, D);
}
void UlyssesAttention::attention_backward_bf16(uint16_t* dqkv, const uint16_t* dout, const uint16_t* qkv,
                                               const uint16_t* out, const float* lse, int64_t B, int64_t H, int64_t Hkv,
                                               int64_t D) {
  backward(dqkv, dout, qkv, out, lse, B, H, Hkv, D);
}

}  // namespace ft

#include "parallel/context_parallel/ulysses_attention.h"

#include "kernels/ops.h"
#include "tensor/memory.h"
#include "util/error.h"

namespace ft {

namespace {
constexpr int kTagA2A = 3311;
}  // namespace

UlyssesAttention::UlyssesAttention(Communicator& cp, int64_t seq_len, bool dry)
    : ContextSplit(cp.size(), cp.rank(), seq_len, dry), comm_(cp) {
  const int64_t n = size();
  FT_CHECK(seq_len % (2 * n) == 0, "all-to-all attention: seq_len {} is not a multiple of 2 x cp = {}", seq_len, 2 * n);
  for (int64_t r = 0; r < n; ++r) positions_.push_back(zigzag_positions(seq_len, n, r));
  send_.resize(static_cast<size_t>(n));
  recv_.resize(static_cast<size_t>(n));
  send_n_.resize(static_cast<size_t>(n));
  recv_n_.resize(static_cast<size_t>(n));
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

void UlyssesAttention::size_buffers(int64_t j, int64_t send_n, int64_t recv_n) {
  const auto i = static_cast<size_t>(j);
  send_n_[i] = send_n, recv_n_[i] = recv_n;
  if (dry()) return;
  send_[i].resize(static_cast<size_t>(send_n));
  recv_[i].resize(static_cast<size_t>(recv_n));
}

void UlyssesAttention::exchange() {
  auto ptr = [](std::vector<float>& v) { return v.empty() ? nullptr : v.data(); };
  std::vector<WorkPtr> works;
  for (int64_t j = 0; j < size(); ++j) {
    if (j == rank()) continue;
    const auto i = static_cast<size_t>(j);
    works.push_back(comm_.recv_async(ptr(recv_[i]), recv_n_[i] * static_cast<int64_t>(sizeof(float)),
                                     static_cast<int>(j), kTagA2A));
  }
  for (int64_t j = 0; j < size(); ++j) {
    if (j == rank()) continue;
    const auto i = static_cast<size_t>(j);
    works.push_back(comm_.send_async(ptr(send_[i]), send_n_[i] * static_cast<int64_t>(sizeof(float)),
                                     static_cast<int>(j), kTagA2A));
  }
  if (!dry()) {
    auto& mine = send_[static_cast<size_t>(rank())];
    mem_copy(cpu_context(), recv_[static_cast<size_t>(rank())].data(), Device::kCPU, mine.data(), Device::kCPU,
             mine.size() * sizeof(float));
  }
  for (auto& w : works) w->wait();
}

template <typename Cols>
void UlyssesAttention::to_heads(float* full, const float* local, int64_t ld, int64_t B, Cols cols) {
  const int64_t T = local_tokens(), S = seq_len(), w = width(cols(rank()));
  for (int64_t j = 0; j < size(); ++j) {  // to rank j: its columns of this rank's tokens
    const Segments seg = cols(j);
    size_buffers(j, B * T * width(seg), B * T * w);
    if (dry()) continue;
    float* o = send_[static_cast<size_t>(j)].data();
    for (int64_t t = 0; t < B * T; ++t)
      for (auto [c0, n] : seg)
        for (int64_t c = 0; c < n; ++c) *o++ = local[t * ld + c0 + c];
  }
  exchange();
  if (dry()) return;
  for (int64_t src = 0; src < size(); ++src) {  // rank src's tokens, at their positions
    const float* in = recv_[static_cast<size_t>(src)].data();
    const std::vector<int64_t>& pos = positions_[static_cast<size_t>(src)];
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t, in += w) {
        float* row = full + (b * S + pos[static_cast<size_t>(t)]) * w;
        for (int64_t c = 0; c < w; ++c) row[c] = in[c];
      }
  }
}

template <typename Cols>
void UlyssesAttention::from_heads(float* local, int64_t ld, const float* full, int64_t B, Cols cols, bool add) {
  const int64_t T = local_tokens(), S = seq_len(), w = width(cols(rank()));
  for (int64_t dst = 0; dst < size(); ++dst) {  // to rank dst: this rank's columns of its tokens
    size_buffers(dst, B * T * w, B * T * width(cols(dst)));
    if (dry()) continue;
    float* o = send_[static_cast<size_t>(dst)].data();
    const std::vector<int64_t>& pos = positions_[static_cast<size_t>(dst)];
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        const float* row = full + (b * S + pos[static_cast<size_t>(t)]) * w;
        for (int64_t c = 0; c < w; ++c) *o++ = row[c];
      }
  }
  exchange();
  if (dry()) return;
  for (int64_t j = 0; j < size(); ++j) {  // rank j's columns of this rank's tokens
    const Segments seg = cols(j);
    const float* in = recv_[static_cast<size_t>(j)].data();
    for (int64_t t = 0; t < B * T; ++t)
      for (auto [c0, n] : seg)
        for (int64_t c = 0; c < n; ++c, ++in) {
          float& x = local[t * ld + c0 + c];
          x = add ? x + *in : *in;
        }
  }
}

void UlyssesAttention::attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t H, int64_t Hkv,
                                         int64_t D) {
  FT_CHECK(H == H_ && Hkv == Hkv_, "all-to-all attention built for {} / {} heads, called with {} / {}", H_, Hkv_, H,
           Hkv);
  const Heads me = heads_of(rank());
  const int64_t S = seq_len();
  auto qcols = [&](int64_t j) { return qkv_columns(j, D); };
  auto ocols = [&](int64_t j) { return out_columns(j, D); };
  if (!dry()) {
    qkv_full_.resize(static_cast<size_t>(B * S * (me.nq + 2 * me.nkv) * D));
    out_full_.resize(static_cast<size_t>(B * S * me.nq * D));
  }
  to_heads(qkv_full_.data(), qkv, (H + 2 * Hkv) * D, B, qcols);
  if (!dry()) ops::attention_forward(cpu_context(), out_full_.data(), lse, qkv_full_.data(), B, S, me.nq, me.nkv, D);
  from_heads(out, H * D, out_full_.data(), B, ocols, false);
}

void UlyssesAttention::attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                                          const float* lse, int64_t B, int64_t H, int64_t Hkv, int64_t D) {
  const Heads me = heads_of(rank());
  const int64_t S = seq_len(), T = local_tokens();
  auto qcols = [&](int64_t j) { return qkv_columns(j, D); };
  auto ocols = [&](int64_t j) { return out_columns(j, D); };
  if (!dry()) {
    qkv_full_.resize(static_cast<size_t>(B * S * (me.nq + 2 * me.nkv) * D));
    out_full_.resize(static_cast<size_t>(B * S * me.nq * D));
    dout_full_.resize(out_full_.size());
    dqkv_full_.resize(qkv_full_.size());
  }
  to_heads(qkv_full_.data(), qkv, (H + 2 * Hkv) * D, B, qcols);
  to_heads(out_full_.data(), out, H * D, B, ocols);
  to_heads(dout_full_.data(), dout, H * D, B, ocols);
  if (!dry()) {
    ops::attention_backward(cpu_context(), dqkv_full_.data(), dout_full_.data(), qkv_full_.data(), out_full_.data(),
                            lse, B, S, me.nq, me.nkv, D);
    // Replicated kv heads (cp > Hkv) get a gradient from each of their ranks: summed.
    mem_zero(cpu_context(), dqkv, Device::kCPU, static_cast<size_t>(B * T * (H + 2 * Hkv) * D) * sizeof(float));
  }
  from_heads(dqkv, (H + 2 * Hkv) * D, dqkv_full_.data(), B, qcols, true);
}

}  // namespace ft

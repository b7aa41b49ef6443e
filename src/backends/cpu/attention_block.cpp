// Block attention for the context-parallel ring (see attention_block.h), tiled like the unsplit
// attention (attention.cpp) on the micro-kernel of attention_gemm.h.
//
// Causality is by position: key j is visible to query i iff pos_k[j] <= pos_q[i]. Both lists
// ascend, so with first_q[j] = the first query that sees key j, the lanes of a query vector that
// see key j are those from first_q[j] on — the mask of a tile, computed per key. Queries that see
// no key of the block (a prefix of them) are left out; every other query sees key 0, so the first
// key tile never leaves a query row without a score. Tiles no query of the block sees are skipped.
//
// Forward, per task (b, query head, query block): Qᵀ packed in the log2 domain; per key tile
// Sᵀ = K Qᵀ, masked online softmax, O = O·alpha + P V; the block's (O / l, lse) merged into
// (out, lse) by their log-sum-exp.
// Backward, one task per (b, kv head) (it owns that head's dK, dV and the dQ rows of its group):
// per (query block, key tile) P = exp2(S − lse2), dV += Pᵀ dO, dS = P ∘ (V dOᵀ − delta)·scale,
// dK += dSᵀ Q, dQ += dS K; dQ, dK, dV are added to dqkv, dkv.
#include "backends/cpu/attention_block.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/cpu/attention_gemm.h"
#include "backends/cpu/thread_scratch.h"
#include "kernels/ops.h"
#include "util/error.h"

namespace ft::cpu {

namespace {

using namespace attn;

constexpr int64_t kBr = 64;  // queries per tile (lanes of Sᵀ)
constexpr int64_t kBc = 64;  // keys per tile
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

int64_t round16(int64_t x) {
  return (x + 15) / 16 * 16;
}

void check_sizes(int64_t H, int64_t Hkv, int64_t D) {
  FT_CHECK(H > 0 && Hkv > 0 && H % Hkv == 0 && D > 0, "block attention: H = {}, Hkv = {}, D = {}", H, Hkv, D);
}

// Sizes, strides and the position mask shared by every tile of one call.
struct BlockGeom {
  int64_t B, Tq, Tk, H, Hkv, D, Dp, row, kv_row, group;
  int64_t q_begin;               // first query that sees any key of the block
  std::vector<int64_t> first_q;  // per key: the first query that sees it (Tq if none)
  float scale;
  BlockGeom(const int64_t* pos_q, const int64_t* pos_k, int64_t B_, int64_t Tq_, int64_t Tk_, int64_t H_, int64_t Hkv_,
            int64_t D_)
      : B(B_),
        Tq(Tq_),
        Tk(Tk_),
        H(H_),
        Hkv(Hkv_),
        D(D_),
        Dp(round16(D_)),
        row((H_ + 2 * Hkv_) * D_),
        kv_row(2 * Hkv_ * D_),
        group(H_ / Hkv_),
        first_q(static_cast<size_t>(Tk_)),
        scale(static_cast<float>(1.0 / std::sqrt(static_cast<double>(D_)))) {
    for (int64_t j = 0; j < Tk; ++j)
      first_q[static_cast<size_t>(j)] = std::lower_bound(pos_q, pos_q + Tq, pos_k[j]) - pos_q;
    q_begin = first_q[0];
  }
  int64_t fq(int64_t j) const { return first_q[static_cast<size_t>(j)]; }
  // Keys [0, n) hold every key some query of [i0, i0 + br) sees.
  int64_t keys_for(int64_t i0, int64_t br) const {
    return std::lower_bound(first_q.begin(), first_q.end(), i0 + br) - first_q.begin();
  }
  // Whether some key of tile [j0, j0 + bc) is hidden from some query of [i0, i0 + br).
  bool partial(int64_t i0, int64_t j0, int64_t bc) const { return fq(j0 + bc - 1) > i0; }
  int64_t nblk_q() const { return (Tq - q_begin + kBr - 1) / kBr; }
};

void prefetch_rows(const float* p, int64_t ld, int64_t n, int64_t D) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = 0; d < D; d += 16) __builtin_prefetch(p + i * ld + d, 0, 3);
}

// dst(D, kBr) = c · src(br rows of stride ld, D)ᵀ; lanes br..round16(br) zero.
void pack_transposed(float* dst, const float* src, int64_t ld, int64_t br, int64_t D, float c) {
  prefetch_rows(src, ld, br, D);
  const F32x16 cv = set1(c);
  for (int64_t v = 0; v < br; v += 16) {
    const int n = width(br - v);
    for (int64_t d = 0; d < D; ++d) store(dst + d * kBr + v, gather(src + v * ld + d, ld, n) * cv);
  }
}

// dst(n, Dp) = src(n rows of stride ld, D), padding columns zero.
void pack_rows(float* dst, int64_t Dp, const float* src, int64_t ld, int64_t n, int64_t D) {
  prefetch_rows(src, ld, n, D);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = 0; d < Dp; d += 16) store(dst + i * Dp + d, load(src + i * ld + d, width(D - d)));
}

// dst rows (stride ld, D) += src(n, Dp) rows.
void add_rows(float* dst, int64_t ld, const float* src, int64_t Dp, int64_t n, int64_t D) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = 0; d < D; d += 16) {
      const int w = width(D - d);
      store(dst + i * ld + d, load(dst + i * ld + d, w) + load(src + i * Dp + d, w), w);
    }
}

// One thread's copy of the block's keys and values of kv head (b, kh): two (Tk, Dp) panels.
class KvPanel {
 public:
  static int64_t floats(const BlockGeom& g) { return 2 * g.Tk * g.Dp; }
  KvPanel(float* p, const BlockGeom& g) : g_(g), k_(p), v_(p + g.Tk * g.Dp) {}
  void need(const float* kv, int64_t b, int64_t kh) {
    if (b == b_ && kh == kh_) return;
    b_ = b, kh_ = kh;
    const float* src = kv + b * g_.Tk * g_.kv_row + kh * g_.D;
    pack_rows(k_, g_.Dp, src, g_.kv_row, g_.Tk, g_.D);
    pack_rows(v_, g_.Dp, src + g_.Hkv * g_.D, g_.kv_row, g_.Tk, g_.D);
  }
  const float* k(int64_t t) const { return k_ + t * g_.Dp; }
  const float* v(int64_t t) const { return v_ + t * g_.Dp; }

 private:
  const BlockGeom& g_;
  float *k_, *v_;
  int64_t b_ = -1, kh_ = -1;
};

// ---- forward ------------------------------------------------------------------------------

struct FwdScratch {
  float *qt, *st, *o, *m, *l, *alpha;
  static int64_t floats(const BlockGeom& g) { return g.D * kBr + kBc * kBr + kBr * g.Dp + 3 * kBr; }
  FwdScratch(float* p, const BlockGeom& g)
      : qt(p), st(qt + g.D * kBr), o(st + kBc * kBr), m(o + kBr * g.Dp), l(m + kBr), alpha(l + kBr) {}
};

void softmax_tile(FwdScratch& s, const BlockGeom& g, int64_t bc, int64_t brp, int64_t i0, int64_t j0, bool part) {
  const F32x16 neg_inf = set1(-std::numeric_limits<float>::infinity());
  for (int64_t v = 0; v < brp; v += 16) {
    const F32x16 m_old = load(s.m + v);
    F32x16 mx = m_old;
    for (int64_t j = 0; j < bc; ++j) {
      F32x16 x = load(s.st + j * kBr + v);
      if (part) x = select(lanes_from(g.fq(j0 + j) - (i0 + v)), x, neg_inf);
      mx = max(mx, x);
    }
    const F32x16 alpha = exp2_nonpos(m_old - mx);
    F32x16 sum = zero();
    for (int64_t j = 0; j < bc; ++j) {
      float* sp = s.st + j * kBr + v;
      F32x16 p = exp2_nonpos(load(sp) - mx);
      if (part) p = select(lanes_from(g.fq(j0 + j) - (i0 + v)), p, zero());
      store(sp, p);
      sum = sum + p;
    }
    store(s.l + v, fmadd(load(s.l + v), alpha, sum));
    store(s.m + v, mx);
    store(s.alpha + v, alpha);
  }
}

void forward_block(float* out, float* lse, const float* qkv, const BlockGeom& g, int64_t b, int64_t h, int64_t i0,
                   FwdScratch& s, const KvPanel& kv) {
  const int64_t br = std::min(kBr, g.Tq - i0), brp = round16(br), nk = g.keys_for(i0, br);
  pack_transposed(s.qt, qkv + (b * g.Tq + i0) * g.row + h * g.D, g.row, br, g.D, g.scale * kLog2e);
  for (int64_t i = 0; i < kBr; ++i) {
    s.m[i] = -std::numeric_limits<float>::infinity();
    s.l[i] = 0.0f;
  }
  for (int64_t j0 = 0; j0 < nk; j0 += kBc) {
    const int64_t bc = std::min(kBc, nk - j0);
    const bool part = g.partial(i0, j0, bc);
    gemm_bcast({s.st, kBr}, {kv.k(j0), g.Dp, 1}, {s.qt, kBr}, bc, brp, g.D, Init::kZero, nullptr, Causal::kNone, 0);
    softmax_tile(s, g, bc, brp, i0, j0, part);
    gemm_bcast({s.o, g.Dp}, {s.st, 1, kBr}, {kv.v(j0), g.Dp}, br, g.D, bc, j0 == 0 ? Init::kZero : Init::kLoadScaled,
               s.alpha, Causal::kNone, 0);
  }
  // Merge (O / l, lse_blk) into (out, lse).
  const int64_t ldo = g.H * g.D;
  float* o = out + (b * g.Tq + i0) * ldo + h * g.D;
  for (int64_t i = 0; i < br; ++i) {
    const float l_blk = (s.m[i] + std::log2(s.l[i])) * kLn2;
    float& lse_i = lse[(b * g.H + h) * g.Tq + i0 + i];
    float a = 0.0f, c = 1.0f / s.l[i];
    if (!std::isinf(lse_i)) {
      const float mx = std::max(lse_i, l_blk), ea = std::exp(lse_i - mx), ec = std::exp(l_blk - mx), ac = ea + ec;
      a = ea / ac, c = ec / ac / s.l[i];
      lse_i = mx + std::log(ac);
    } else {
      lse_i = l_blk;
    }
    const F32x16 av = set1(a), cv = set1(c);
    for (int64_t d = 0; d < g.D; d += 16) {
      const int w = width(g.D - d);
      store(o + i * ldo + d, fmadd(load(o + i * ldo + d, w), av, load(s.o + i * g.Dp + d, w) * cv), w);
    }
  }
}

// ---- backward -----------------------------------------------------------------------------

struct BwdScratch {
  float *qt, *dot, *qn, *don, *dq, *pt, *dst, *lse2, *delta, *dk, *dv;
  static int64_t floats(const BlockGeom& g) {
    return 2 * g.D * kBr + 3 * kBr * g.Dp + 2 * kBc * kBr + 2 * kBr + 2 * g.Tk * g.Dp;
  }
  BwdScratch(float* p, const BlockGeom& g)
      : qt(p),
        dot(qt + g.D * kBr),
        qn(dot + g.D * kBr),
        don(qn + kBr * g.Dp),
        dq(don + kBr * g.Dp),
        pt(dq + kBr * g.Dp),
        dst(pt + kBc * kBr),
        lse2(dst + kBc * kBr),
        delta(lse2 + kBr),
        dk(delta + kBr),
        dv(dk + g.Tk * g.Dp) {}
};

void backward_tile(BwdScratch& s, const BlockGeom& g, const KvPanel& kv, int64_t i0, int64_t br, int64_t j0,
                   int64_t bc) {
  const int64_t brp = round16(br);
  const bool part = g.partial(i0, j0, bc);
  gemm_bcast({s.pt, kBr}, {kv.k(j0), g.Dp, 1}, {s.qt, kBr}, bc, brp, g.D, Init::kZero, nullptr, Causal::kNone, 0);
  for (int64_t j = 0; j < bc; ++j) {
    for (int64_t v = 0; v < brp; v += 16) {
      float* p = s.pt + j * kBr + v;
      F32x16 x = exp2_nonpos(load(p) - load(s.lse2 + v));
      if (part) x = select(lanes_from(g.fq(j0 + j) - (i0 + v)), x, zero());
      store(p, x);
    }
  }
  gemm_bcast({s.dv + j0 * g.Dp, g.Dp}, {s.pt, kBr, 1}, {s.don, g.Dp}, bc, g.D, br, Init::kLoad, nullptr, Causal::kNone,
             0);
  gemm_bcast({s.dst, kBr}, {kv.v(j0), g.Dp, 1}, {s.dot, kBr}, bc, brp, g.D, Init::kZero, nullptr, Causal::kNone, 0);
  const F32x16 scale = set1(g.scale);
  for (int64_t j = 0; j < bc; ++j) {
    for (int64_t v = 0; v < brp; v += 16) {
      float* ds = s.dst + j * kBr + v;
      store(ds, load(s.pt + j * kBr + v) * (load(ds) - load(s.delta + v)) * scale);
    }
  }
  gemm_bcast({s.dk + j0 * g.Dp, g.Dp}, {s.dst, kBr, 1}, {s.qn, g.Dp}, bc, g.D, br, Init::kLoad, nullptr, Causal::kNone,
             0);
  gemm_bcast({s.dq, g.Dp}, {s.dst, 1, kBr}, {kv.k(j0), g.Dp}, br, g.D, bc, j0 == 0 ? Init::kZero : Init::kLoad, nullptr,
             Causal::kNone, 0);
}

}  // namespace

void attention_block_init(float* out, float* lse, int64_t B, int64_t Tq, int64_t H, int64_t D) {
  std::fill_n(out, B * Tq * H * D, 0.0f);
  std::fill_n(lse, B * H * Tq, -std::numeric_limits<float>::infinity());
}

void attention_pack_kv(float* kv, const float* qkv, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D) {
  const int64_t row = (H + 2 * Hkv) * D, n = 2 * Hkv * D;
  for (int64_t t = 0; t < B * T; ++t) std::memcpy(kv + t * n, qkv + t * row + H * D, sizeof(float) * n);
}

void attention_unpack_dkv(float* dqkv, const float* dkv, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D) {
  const int64_t row = (H + 2 * Hkv) * D, n = 2 * Hkv * D;
  for (int64_t t = 0; t < B * T; ++t) std::memcpy(dqkv + t * row + H * D, dkv + t * n, sizeof(float) * n);
}

void attention_block_forward(float* out, float* lse, const float* qkv, const float* kv, const int64_t* pos_q,
                             const int64_t* pos_k, int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv,
                             int64_t D) {
  check_sizes(H, Hkv, D);
  if (Tk == 0 || Tq == 0 || pos_k[0] > pos_q[Tq - 1]) return;  // every key after every query
  const BlockGeom g(pos_q, pos_k, B, Tq, Tk, H, Hkv, D);
  const int64_t nblk = g.nblk_q(), ntasks = nblk * B * H;
  ThreadScratch buf(FwdScratch::floats(g) + KvPanel::floats(g));
#pragma omp parallel
  {
    float* mine = buf.slice(omp_get_thread_num());
    FwdScratch s(mine, g);
    KvPanel kvp(mine + FwdScratch::floats(g), g);
    // Consecutive tasks share a head (its panel stays); the last query blocks see the most keys.
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < ntasks; ++task) {
      const int64_t bh = task / nblk, b = bh / H, h = bh % H;
      kvp.need(kv, b, h / g.group);
      forward_block(out, lse, qkv, g, b, h, g.q_begin + (nblk - 1 - task % nblk) * kBr, s, kvp);
    }
  }
}

void attention_block_delta(float* delta, const float* dout, const float* out, int64_t B, int64_t Tq, int64_t H,
                           int64_t D) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Tq; ++i) {
        const int64_t at = (b * Tq + i) * H * D + h * D;
        F32x16 acc = zero();
        for (int64_t d = 0; d < D; d += 16) {
          const int w = width(D - d);
          acc = fmadd(load(dout + at + d, w), load(out + at + d, w), acc);
        }
        delta[(b * H + h) * Tq + i] = reduce_add(acc);
      }
}

void attention_block_backward(float* dqkv, float* dkv, const float* dout, const float* qkv, const float* kv,
                              const float* lse, const float* delta, const int64_t* pos_q, const int64_t* pos_k,
                              int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv, int64_t D) {
  check_sizes(H, Hkv, D);
  if (Tk == 0 || Tq == 0 || pos_k[0] > pos_q[Tq - 1]) return;
  const BlockGeom g(pos_q, pos_k, B, Tq, Tk, H, Hkv, D);
  ThreadScratch buf(BwdScratch::floats(g) + KvPanel::floats(g));
  // One task per (b, kv head): it owns that head's dk, dv rows and the dq rows of its group.
#pragma omp parallel
  {
    float* mine = buf.slice(omp_get_thread_num());
    BwdScratch s(mine, g);
    KvPanel kvp(mine + BwdScratch::floats(g), g);
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < B * Hkv; ++task) {
      const int64_t b = task / Hkv, kh = task % Hkv;
      kvp.need(kv, b, kh);
      std::fill_n(s.dk, 2 * Tk * g.Dp, 0.0f);  // dk and dv
      for (int64_t h = kh * g.group; h < (kh + 1) * g.group; ++h) {
        for (int64_t i0 = g.q_begin; i0 < Tq; i0 += kBr) {
          const int64_t br = std::min(kBr, Tq - i0), nk = g.keys_for(i0, br);
          const float* q = qkv + (b * Tq + i0) * g.row + h * D;
          const float* dO = dout + (b * Tq + i0) * H * D + h * D;
          pack_transposed(s.qt, q, g.row, br, D, g.scale * kLog2e);
          pack_transposed(s.dot, dO, H * D, br, D, 1.0f);
          pack_rows(s.qn, g.Dp, q, g.row, br, D);
          pack_rows(s.don, g.Dp, dO, H * D, br, D);
          const int64_t base = (b * H + h) * Tq + i0;
          for (int64_t i = 0; i < kBr; ++i) {
            s.lse2[i] = i < br ? lse[base + i] * kLog2e : 0.0f;
            s.delta[i] = i < br ? delta[base + i] : 0.0f;
          }
          for (int64_t j0 = 0; j0 < nk; j0 += kBc) backward_tile(s, g, kvp, i0, br, j0, std::min(kBc, nk - j0));
          add_rows(dqkv + (b * Tq + i0) * g.row + h * D, g.row, s.dq, g.Dp, br, D);
        }
      }
      float* dk = dkv + b * Tk * g.kv_row + kh * D;
      add_rows(dk, g.kv_row, s.dk, g.Dp, Tk, D);
      add_rows(dk + Hkv * D, g.kv_row, s.dv, g.Dp, Tk, D);
    }
  }
}

// ---- The op table's block attention (kernels/op_decls.inc): the functions above ---------------

namespace {
std::vector<int64_t> widen(const int32_t* pos, int64_t n) {
  return std::vector<int64_t>(pos, pos + n);
}
}  // namespace

void attention_block_forward(const ExecContext&, float* out, float* lse, const float* qkv, const float* kv,
                             const int32_t* pos_q, const int32_t* pos_k, int64_t B, int64_t Tq, int64_t Tk, int64_t H,
                             int64_t Hkv, int64_t D, bool accumulate) {
  if (!accumulate) attention_block_init(out, lse, B, Tq, H, D);
  const std::vector<int64_t> pq = widen(pos_q, Tq), pk = widen(pos_k, Tk);
  attention_block_forward(out, lse, qkv, kv, pq.data(), pk.data(), B, Tq, Tk, H, Hkv, D);
}

void attention_block_backward(const ExecContext&, float* dqkv, float* dkv, const float* dout, const float* qkv,
                              const float* kv, const float* out, const float* lse, const int32_t* pos_q,
                              const int32_t* pos_k, int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv,
                              int64_t D) {
  std::vector<float> delta(static_cast<size_t>(B * H * Tq));
  attention_block_delta(delta.data(), dout, out, B, Tq, H, D);
  const std::vector<int64_t> pq = widen(pos_q, Tq), pk = widen(pos_k, Tk);
  attention_block_backward(dqkv, dkv, dout, qkv, kv, lse, delta.data(), pq.data(), pk.data(), B, Tq, Tk, H, Hkv, D);
}

// The bf16 forms (the ring's blocks in bf16): as attention.cpp's, the fp32 kernels above on widened
// copies (exact) in one workspace; out, lse and dq stay fp32; dkv is widened, added to, rounded.
void attention_block_forward_bf16(const ExecContext& ctx, float* out, float* lse, const uint16_t* qkv,
                                  const uint16_t* kv, const int32_t* pos_q, const int32_t* pos_k, int64_t B, int64_t Tq,
                                  int64_t Tk, int64_t H, int64_t Hkv, int64_t D, bool accumulate) {
  const int64_t n_qkv = B * Tq * (H + 2 * Hkv) * D, n_kv = B * Tk * 2 * Hkv * D;
  ThreadScratch wide(n_qkv + n_kv, 1);
  float *x = wide.slice(0), *k = x + n_qkv;
  from_bf16(ctx, x, qkv, n_qkv);
  from_bf16(ctx, k, kv, n_kv);
  attention_block_forward(ctx, out, lse, x, k, pos_q, pos_k, B, Tq, Tk, H, Hkv, D, accumulate);
}

void attention_block_backward_bf16(const ExecContext& ctx, float* dqkv, uint16_t* dkv, const uint16_t* dout,
                                   const uint16_t* qkv, const uint16_t* kv, const uint16_t* out, const float* lse,
                                   const int32_t* pos_q, const int32_t* pos_k, int64_t B, int64_t Tq, int64_t Tk,
                                   int64_t H, int64_t Hkv, int64_t D) {
  const int64_t n_qkv = B * Tq * (H + 2 * Hkv) * D, n_kv = B * Tk * 2 * Hkv * D, n_out = B * Tq * H * D;
  ThreadScratch wide(n_qkv + 2 * n_kv + 2 * n_out, 1);
  float *x = wide.slice(0), *k = x + n_qkv, *dk = k + n_kv, *o = dk + n_kv, *d = o + n_out;
  from_bf16(ctx, x, qkv, n_qkv);
  from_bf16(ctx, k, kv, n_kv);
  from_bf16(ctx, dk, dkv, n_kv);
  from_bf16(ctx, o, out, n_out);
  from_bf16(ctx, d, dout, n_out);
  attention_block_backward(ctx, dqkv, dk, d, x, k, o, lse, pos_q, pos_k, B, Tq, Tk, H, Hkv, D);
  to_bf16(ctx, dkv, dk, n_kv);
}

}  // namespace ft::cpu

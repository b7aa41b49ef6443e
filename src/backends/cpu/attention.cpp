// Causal grouped-query attention on the CPU, flash-attention style (forward and backward).
//
// Each thread copies the keys and values of the kv head it works on into a contiguous panel
// (T, Dp) each, once per head, as its tasks first need them (HeadPanel). In qkv, rows of a
// head lie (H + 2 Hkv)·D floats apart — often a multiple of 1 KiB, so a block's rows would
// share a few L1 sets — and copying per tile instead costs ~20% of the time.
//
// Forward, per task (batch b, query head h, query block of kBr rows):
//   Qᵀ packed once (pre-multiplied by scale·log2 e, so scores are in the log2 domain);
//   for each key block (kBc keys) left of the diagonal: Sᵀ = K Qᵀ, online softmax, O += P V;
//   out = O / l, lse = (m + log2 l) · ln 2.
// Backward (FlashAttention-2): D_i = rowsum(dO ∘ O); per (query block, key block) tile
//   recompute P = exp(S − lse), dV += Pᵀ dO, dP = dO Vᵀ, dS = P ∘ (dP − D) · scale,
//   dK += dSᵀ Q, dQ += dS K.
//   Fused schedule: one task per (b, kv head) owns dK, dV of its kv head and dQ of the group's
//   query heads, so nothing is shared. When there are too few such tasks for the threads
//   (e.g. B = 1 and 1 kv head), two passes instead: dK, dV per (b, kv head, key block), then
//   dQ per (b, head, query block) — 7 products per tile instead of 5, but every thread busy.
//
// Scores are kept transposed (keys x queries) so the softmax statistics of a query block are
// vector lanes; all products run on the micro-kernel of attention_gemm.h. Tiles right of the
// diagonal are skipped, and so are the masked row groups / vectors of diagonal tiles.
//
// Memory: no (T, T) matrix anywhere. Per thread, with Dp = D rounded up to 16:
//   the head panel, 2 (T, Dp)                             — 1 MiB at T = 2048, D = 64;
//   forward tiles   Qᵀ (D, kBr) + Sᵀ (kBc, kBr) + O (kBr, Dp) + 3 kBr
//                                                         — 49 KiB at D = 64, 81 KiB at D = 128;
//   backward tiles  Qᵀ, dOᵀ (D, kBr) + Q, dO, dQ (kBr, Dp) + Pᵀ, dSᵀ (kBc, kBr)
//                   + dK, dV (kBc, Dp) + 2 kBr            — 145 KiB at D = 64, 257 KiB at D = 128;
// shared: D_i (B, H, T) in backward, the size of lse.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cpu/attention_gemm.h"
#include "backends/cpu/thread_scratch.h"
#include "kernels/attention_checks.h"
#include "kernels/ops.h"

namespace ft::cpu {

namespace {

using namespace attn;

constexpr int64_t kBr = 64;  // queries per tile: the lanes of Sᵀ (a multiple of 16)
constexpr int64_t kBc = 64;  // keys per tile
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

int64_t round16(int64_t x) {
  return (x + 15) / 16 * 16;
}

// Sizes and strides shared by every tile of one call.
struct Geometry {
  int64_t B, T, H, Hkv, D, Dp, row, group, nblk_q, nblk_k;
  float scale;  // 1 / sqrt(D)
  Geometry(int64_t B_, int64_t T_, int64_t H_, int64_t Hkv_, int64_t D_)
      : B(B_),
        T(T_),
        H(H_),
        Hkv(Hkv_),
        D(D_),
        Dp(round16(D_)),
        row((H_ + 2 * Hkv_) * D_),
        group(H_ / Hkv_),
        nblk_q((T_ + kBr - 1) / kBr),
        nblk_k((T_ + kBc - 1) / kBc),
        scale(static_cast<float>(1.0 / std::sqrt(static_cast<double>(D_)))) {}
  const float* q(const float* qkv, int64_t b, int64_t t, int64_t h) const { return qkv + (b * T + t) * row + h * D; }
};

// Requests n rows of D floats at stride ld into L1 at once: rows of qkv lie pages apart, where
// the hardware prefetchers do not follow, and loading them one by one would pay the memory
// latency per row.
void prefetch_rows(const float* p, int64_t ld, int64_t n, int64_t D) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = 0; d < D; d += 16) __builtin_prefetch(p + i * ld + d, 0, 3);
}

// dst(D, kBr) = c · src(br rows of stride ld, D)ᵀ; lanes br..round16(br) zero.
void pack_transposed(float* dst, const float* src, int64_t ld, int64_t br, int64_t D, float c) {
  prefetch_rows(src, ld, br, D);
  const F32x16 cv = set1(c);
  for (int64_t v = 0; v < br; v += 16) {  // 16 rows at a time: one gather per column
    const int n = width(br - v);
    for (int64_t d = 0; d < D; ++d) store(dst + d * kBr + v, gather(src + v * ld + d, ld, n) * cv);
  }
}

// dst(n, Dp) = src(n rows of stride ld, D).
void pack_rows(float* dst, int64_t Dp, const float* src, int64_t ld, int64_t n, int64_t D) {
  prefetch_rows(src, ld, n, D);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = 0; d < D; d += 16) {
      const int w = width(D - d);
      store(dst + i * Dp + d, load(src + i * ld + d, w), w);
    }
}

// dst rows (stride ld, D) = src(n, Dp) rows.
void unpack_rows(float* dst, int64_t ld, const float* src, int64_t Dp, int64_t n, int64_t D) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = 0; d < D; d += 16) {
      const int w = width(D - d);
      store(dst + i * ld + d, load(src + i * Dp + d, w), w);
    }
}

// One thread's copy of the keys and values of kv head (b, kh): rows 0..packed of two (T, Dp)
// panels, padding columns zero. Tasks of one head follow each other, so a thread copies a
// head's keys and values about once, however many query blocks and heads read them.
class HeadPanel {
 public:
  static int64_t floats(const Geometry& g) { return 2 * g.T * g.Dp; }
  HeadPanel(float* p, const Geometry& g) : g_(g), k_(p), v_(p + g.T * g.Dp) {}

  // Makes rows [0, rows) of kv head (b, kh) available.
  void need(const float* qkv, int64_t b, int64_t kh, int64_t rows) {
    if (b != b_ || kh != kh_) b_ = b, kh_ = kh, packed_ = 0;
    if (rows <= packed_) return;
    const int64_t vo = g_.Hkv * g_.D;  // values sit Hkv heads after the keys
    const float* src = qkv + (b * g_.T + packed_) * g_.row + (g_.H + kh) * g_.D;
    constexpr int64_t kAhead = 32;  // rows requested ahead of the copy
    const int64_t first = std::min(kAhead, rows - packed_);
    prefetch_rows(src, g_.row, first, g_.D);
    prefetch_rows(src + vo, g_.row, first, g_.D);
    for (int64_t t = packed_; t < rows; ++t, src += g_.row) {
      if ((t - packed_) % kAhead == 0 && t + kAhead < rows) {
        const int64_t n = std::min(kAhead, rows - t - kAhead);
        prefetch_rows(src + kAhead * g_.row, g_.row, n, g_.D);
        prefetch_rows(src + kAhead * g_.row + vo, g_.row, n, g_.D);
      }
      for (int64_t d = 0; d < g_.Dp; d += 16) {
        const int w = width(g_.D - d);
        store(k_ + t * g_.Dp + d, load(src + d, w));
        store(v_ + t * g_.Dp + d, load(src + vo + d, w));
      }
    }
    packed_ = rows;
  }
  const float* k(int64_t t) const { return k_ + t * g_.Dp; }  // rows t.., stride Dp
  const float* v(int64_t t) const { return v_ + t * g_.Dp; }

 private:
  const Geometry& g_;
  float *k_, *v_;
  int64_t b_ = -1, kh_ = -1, packed_ = 0;
};

// Lanes i of a query vector that key j may attend (j <= i), for a tile on the diagonal.
inline Mask16 causal_lanes(int64_t i_first, int64_t j) {
  return lanes_from(j - i_first);
}

// ---- forward ------------------------------------------------------------------------------

struct FwdScratch {
  float *qt, *st, *o, *m, *l, *alpha;
  static int64_t floats(const Geometry& g) { return g.D * kBr + kBc * kBr + kBr * g.Dp + 3 * kBr; }
  FwdScratch(float* p, const Geometry& g)
      : qt(p), st(qt + g.D * kBr), o(st + kBc * kBr), m(o + kBr * g.Dp), l(m + kBr), alpha(l + kBr) {}
};

// Online softmax over one tile: Sᵀ (bc, kBr) → Pᵀ in place; updates m, l; alpha = rescale.
void softmax_tile(FwdScratch& s, int64_t bc, int64_t brp, int64_t i0, int64_t j0, bool diag) {
  const F32x16 neg_inf = set1(-std::numeric_limits<float>::infinity());
  for (int64_t v = 0; v < brp; v += 16) {
    const F32x16 m_old = load(s.m + v);
    F32x16 mx = m_old;
    for (int64_t j = 0; j < bc; ++j) {
      F32x16 x = load(s.st + j * kBr + v);
      if (diag) x = select(causal_lanes(i0 + v, j0 + j), x, neg_inf);
      mx = max(mx, x);
    }
    const F32x16 alpha = exp2_nonpos(m_old - mx);
    F32x16 sum = zero();
    for (int64_t j = 0; j < bc; ++j) {
      float* sp = s.st + j * kBr + v;
      F32x16 p = exp2_nonpos(load(sp) - mx);
      if (diag) p = select(causal_lanes(i0 + v, j0 + j), p, zero());
      store(sp, p);
      sum = sum + p;
    }
    store(s.l + v, fmadd(load(s.l + v), alpha, sum));
    store(s.m + v, mx);
    store(s.alpha + v, alpha);
  }
}

void forward_block(float* out, float* lse, const float* qkv, const Geometry& g, int64_t b, int64_t h, int64_t i0,
                   FwdScratch& s, HeadPanel& kv) {
  const int64_t br = std::min(kBr, g.T - i0), brp = round16(br);
  kv.need(qkv, b, h / g.group, i0 + br);
  pack_transposed(s.qt, g.q(qkv, b, i0, h), g.row, br, g.D, g.scale * kLog2e);
  for (int64_t i = 0; i < kBr; ++i) {
    s.m[i] = -std::numeric_limits<float>::infinity();
    s.l[i] = 0.0f;
  }
  for (int64_t j0 = 0; j0 < i0 + br; j0 += kBc) {
    const int64_t bc = std::min(kBc, g.T - j0);
    const bool diag = j0 + bc - 1 > i0;  // some key of the tile is right of some query
    gemm_bcast({s.st, kBr}, {kv.k(j0), g.Dp, 1}, {s.qt, kBr}, bc, brp, g.D, Init::kZero, nullptr,
               diag ? Causal::kColsFrom : Causal::kNone, j0 - i0);
    softmax_tile(s, bc, brp, i0, j0, diag);
    // O = O · alpha + P V (the first tile's alpha is 0, and O starts as whatever: use kZero).
    gemm_bcast({s.o, g.Dp}, {s.st, 1, kBr}, {kv.v(j0), g.Dp}, br, g.D, bc, j0 == 0 ? Init::kZero : Init::kLoadScaled,
               s.alpha, diag ? Causal::kKUpTo : Causal::kNone, i0 - j0);
  }
  const int64_t ldo = g.H * g.D;
  float* o = out + (b * g.T + i0) * ldo + h * g.D;
  for (int64_t i = 0; i < br; ++i) {
    const F32x16 inv = set1(1.0f / s.l[i]);
    for (int64_t d = 0; d < g.D; d += 16) store(o + i * ldo + d, load(s.o + i * g.Dp + d) * inv, width(g.D - d));
    lse[(b * g.H + h) * g.T + i0 + i] = (s.m[i] + std::log2(s.l[i])) * kLn2;
  }
}

// ---- backward -----------------------------------------------------------------------------

struct BwdScratch {
  float *qt, *dot, *qn, *don, *dq, *pt, *dst, *dk, *dv, *lse2, *delta;
  static int64_t floats(const Geometry& g) {
    return 2 * g.D * kBr + 3 * kBr * g.Dp + 2 * kBc * kBr + 2 * kBc * g.Dp + 2 * kBr;
  }
  BwdScratch(float* p, const Geometry& g)
      : qt(p),
        dot(qt + g.D * kBr),
        qn(dot + g.D * kBr),
        don(qn + kBr * g.Dp),
        dq(don + kBr * g.Dp),
        pt(dq + kBr * g.Dp),
        dst(pt + kBc * kBr),
        dk(dst + kBc * kBr),
        dv(dk + kBc * g.Dp),
        lse2(dv + kBc * g.Dp),
        delta(lse2 + kBr) {}
};

// A query block packed for backward: Qᵀ scaled into the log2 domain, dOᵀ, Q and dO rows,
// lse · log2 e and D_i, all in the thread's scratch.
struct QBlock {
  int64_t b, h, i0, br, brp;
};

QBlock pack_query_block(BwdScratch& s, const Geometry& g, const float* dout, const float* qkv, const float* lse,
                        const float* delta, int64_t b, int64_t h, int64_t i0) {
  QBlock qb{b, h, i0, std::min(kBr, g.T - i0), 0};
  qb.brp = round16(qb.br);
  const float* q = g.q(qkv, b, i0, h);
  const float* dO = dout + (b * g.T + i0) * g.H * g.D + h * g.D;
  pack_transposed(s.qt, q, g.row, qb.br, g.D, g.scale * kLog2e);
  pack_transposed(s.dot, dO, g.H * g.D, qb.br, g.D, 1.0f);
  pack_rows(s.qn, g.Dp, q, g.row, qb.br, g.D);
  pack_rows(s.don, g.Dp, dO, g.H * g.D, qb.br, g.D);
  const int64_t base = (b * g.H + h) * g.T + i0;
  for (int64_t i = 0; i < kBr; ++i) {
    s.lse2[i] = i < qb.br ? lse[base + i] * kLog2e : 0.0f;
    s.delta[i] = i < qb.br ? delta[base + i] : 0.0f;
  }
  return qb;
}

// Where one tile's gradients go: null pointers skip that product. The init modes say
// whether the tile is the first to touch the rows (kZero) or adds to them (kLoad).
struct GradOut {
  float* dq;  // (br, D) rows of stride ldq
  int64_t ldq;
  Init dq_init;
  float *dk, *dv;  // (bc, D) rows of stride ldkv
  int64_t ldkv;
  Init kv_init;
};

// One (query block, key block j0) tile.
void backward_tile(BwdScratch& s, const QBlock& qb, const HeadPanel& kv, const Geometry& g, int64_t j0,
                   const GradOut& go) {
  const int64_t bc = std::min(kBc, g.T - j0), br = qb.br, brp = qb.brp, i0 = qb.i0;
  const float* K = kv.k(j0);
  const float* V = kv.v(j0);
  const bool diag = j0 + bc - 1 > i0;
  const Causal c_cols = diag ? Causal::kColsFrom : Causal::kNone;
  const Causal c_kfrom = diag ? Causal::kKFrom : Causal::kNone;

  // Pᵀ = exp2(K Qᵀ − lse2)
  gemm_bcast({s.pt, kBr}, {K, g.Dp, 1}, {s.qt, kBr}, bc, brp, g.D, Init::kZero, nullptr, c_cols, j0 - i0);
  for (int64_t j = 0; j < bc; ++j) {
    for (int64_t v = 0; v < brp; v += 16) {
      float* p = s.pt + j * kBr + v;
      F32x16 x = exp2_nonpos(load(p) - load(s.lse2 + v));
      if (diag) x = select(causal_lanes(i0 + v, j0 + j), x, zero());
      store(p, x);
    }
  }
  if (go.dv)
    gemm_bcast({go.dv, go.ldkv}, {s.pt, kBr, 1}, {s.don, g.Dp}, bc, g.D, br, go.kv_init, nullptr, c_kfrom, j0 - i0);
  // dSᵀ = Pᵀ ∘ (V dOᵀ − D_i) · scale
  gemm_bcast({s.dst, kBr}, {V, g.Dp, 1}, {s.dot, kBr}, bc, brp, g.D, Init::kZero, nullptr, c_cols, j0 - i0);
  const F32x16 scale = set1(g.scale);
  for (int64_t j = 0; j < bc; ++j) {
    for (int64_t v = 0; v < brp; v += 16) {
      float* ds = s.dst + j * kBr + v;
      const F32x16 dp = load(ds) - load(s.delta + v);
      F32x16 x = load(s.pt + j * kBr + v) * dp * scale;
      if (diag) x = select(causal_lanes(i0 + v, j0 + j), x, zero());
      store(ds, x);
    }
  }
  if (go.dk)
    gemm_bcast({go.dk, go.ldkv}, {s.dst, kBr, 1}, {s.qn, g.Dp}, bc, g.D, br, go.kv_init, nullptr, c_kfrom, j0 - i0);
  if (go.dq)
    gemm_bcast({go.dq, go.ldq}, {s.dst, 1, kBr}, {K, g.Dp}, br, g.D, bc, go.dq_init, nullptr,
               diag ? Causal::kKUpTo : Causal::kNone, i0 - j0);
}

// D_i = rowsum(dO ∘ O) for every (b, h, t): (B, H, T) like lse.
void compute_delta(float* delta, const float* dout, const float* out, const Geometry& g) {
#pragma omp parallel for schedule(static)
  for (int64_t bt = 0; bt < g.B * g.T; ++bt) {
    const int64_t b = bt / g.T, t = bt % g.T;
    for (int64_t h = 0; h < g.H; ++h) {
      const float* x = dout + bt * g.H * g.D + h * g.D;
      const float* y = out + bt * g.H * g.D + h * g.D;
      F32x16 acc = zero();
      for (int64_t d = 0; d < g.D; d += 16) {
        const int w = width(g.D - d);
        acc = fmadd(load(x + d, w), load(y + d, w), acc);
      }
      delta[(b * g.H + h) * g.T + t] = reduce_add(acc);
    }
  }
}

// Fused schedule: task (b, kv head) owns dK, dV of the kv head and dQ of its query heads.
void backward_fused(float* dqkv, const float* dout, const float* qkv, const float* lse, const float* delta,
                    const Geometry& g) {
  ThreadScratch buf(BwdScratch::floats(g) + HeadPanel::floats(g));
#pragma omp parallel
  {
    float* mine = buf.slice(omp_get_thread_num());
    BwdScratch s(mine, g);
    HeadPanel kv(mine + BwdScratch::floats(g), g);
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < g.B * g.Hkv; ++task) {
      const int64_t b = task / g.Hkv, kh = task % g.Hkv;
      kv.need(qkv, b, kh, g.T);
      float* dk = dqkv + b * g.T * g.row + (g.H + kh) * g.D;
      float* dv = dk + g.Hkv * g.D;
      for (int64_t h = kh * g.group; h < (kh + 1) * g.group; ++h) {
        for (int64_t i0 = 0; i0 < g.T; i0 += kBr) {
          QBlock qb = pack_query_block(s, g, dout, qkv, lse, delta, b, h, i0);
          for (int64_t j0 = 0; j0 < i0 + qb.br; j0 += kBc) {
            // The group's first head meets key block j0 first in the query block holding j0.
            const bool first_kv = h == kh * g.group && i0 == j0 / kBr * kBr;
            backward_tile(s, qb, kv, g, j0,
                          {s.dq, g.Dp, j0 == 0 ? Init::kZero : Init::kLoad, dk + j0 * g.row, dv + j0 * g.row, g.row,
                           first_kv ? Init::kZero : Init::kLoad});
          }
          unpack_rows(dqkv + (b * g.T + i0) * g.row + h * g.D, g.row, s.dq, g.Dp, qb.br, g.D);
        }
      }
    }
  }
}

// Two passes for when (b, kv head) tasks are too few to keep the threads busy.
void backward_two_pass(float* dqkv, const float* dout, const float* qkv, const float* lse, const float* delta,
                       const Geometry& g) {
  ThreadScratch buf(BwdScratch::floats(g) + HeadPanel::floats(g));
#pragma omp parallel
  {
    float* mine = buf.slice(omp_get_thread_num());
    BwdScratch s(mine, g);
    HeadPanel kv(mine + BwdScratch::floats(g), g);
    // dK, dV per (b, kv head, key block), head by head; within a head the first key blocks see
    // the most queries: they go first.
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < g.nblk_k * g.B * g.Hkv; ++task) {
      const int64_t b = task / (g.nblk_k * g.Hkv), kh = (task / g.nblk_k) % g.Hkv, j0 = (task % g.nblk_k) * kBc,
                    bc = std::min(kBc, g.T - j0);
      kv.need(qkv, b, kh, j0 + bc);
      bool first = true;
      for (int64_t h = kh * g.group; h < (kh + 1) * g.group; ++h) {
        for (int64_t i0 = j0 / kBr * kBr; i0 < g.T; i0 += kBr) {
          QBlock qb = pack_query_block(s, g, dout, qkv, lse, delta, b, h, i0);
          backward_tile(s, qb, kv, g, j0,
                        {nullptr, 0, Init::kLoad, s.dk, s.dv, g.Dp, first ? Init::kZero : Init::kLoad});
          first = false;
        }
      }
      float* base = dqkv + (b * g.T + j0) * g.row;
      unpack_rows(base + (g.H + kh) * g.D, g.row, s.dk, g.Dp, bc, g.D);
      unpack_rows(base + (g.H + g.Hkv + kh) * g.D, g.row, s.dv, g.Dp, bc, g.D);
    }
    // dQ per (b, head, query block), head by head; the last query blocks see the most keys.
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < g.nblk_q * g.B * g.H; ++task) {
      const int64_t bh = task / g.nblk_q, b = bh / g.H, h = bh % g.H;
      const int64_t i0 = (g.nblk_q - 1 - task % g.nblk_q) * kBr;
      QBlock qb = pack_query_block(s, g, dout, qkv, lse, delta, b, h, i0);
      kv.need(qkv, b, h / g.group, i0 + qb.br);
      for (int64_t j0 = 0; j0 < i0 + qb.br; j0 += kBc)
        backward_tile(s, qb, kv, g, j0,
                      {s.dq, g.Dp, j0 == 0 ? Init::kZero : Init::kLoad, nullptr, nullptr, 0, Init::kLoad});
      unpack_rows(dqkv + (b * g.T + i0) * g.row + h * g.D, g.row, s.dq, g.Dp, qb.br, g.D);
    }
  }
}

// Fused unless its B·Hkv equal tasks would leave threads idle for more than the ~40% extra
// work the two-pass schedule costs.
bool use_fused_backward(const Geometry& g) {
  const int64_t p = omp_get_max_threads(), n = g.B * g.Hkv;
  if (p <= 1) return true;
  const double efficiency = static_cast<double>(n) / static_cast<double>(p * ((n + p - 1) / p));
  return efficiency >= 0.75;
}

}  // namespace

void attention_forward(const ExecContext&, float* out, float* lse, const float* qkv, int64_t B, int64_t T, int64_t H,
                       int64_t Hkv, int64_t D) {
  check_attention_sizes("attention_forward", B, T, H, Hkv, D);
  const Geometry g(B, T, H, Hkv, D);
  ThreadScratch buf(FwdScratch::floats(g) + HeadPanel::floats(g));
  const int64_t ntasks = g.nblk_q * B * H;
#pragma omp parallel
  {
    float* mine = buf.slice(omp_get_thread_num());
    FwdScratch s(mine, g);
    HeadPanel kv(mine + FwdScratch::floats(g), g);
    // Consecutive tasks share a head, so its keys and values stay in cache; within a head the
    // last query blocks attend to the most keys: hand them out first.
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < ntasks; ++task) {
      const int64_t bh = task / g.nblk_q, b = bh / H, h = bh % H;
      const int64_t i0 = (g.nblk_q - 1 - task % g.nblk_q) * kBr;
      forward_block(out, lse, qkv, g, b, h, i0, s, kv);
    }
  }
}

void attention_backward(const ExecContext&, float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D) {
  check_attention_sizes("attention_backward", B, T, H, Hkv, D);
  const Geometry g(B, T, H, Hkv, D);
  ThreadScratch delta(B * H * T, 1);  // one shared (B, H, T) array
  compute_delta(delta.slice(0), dout, out, g);
  if (use_fused_backward(g))
    backward_fused(dqkv, dout, qkv, lse, delta.slice(0), g);
  else
    backward_two_pass(dqkv, dout, qkv, lse, delta.slice(0), g);
}

// The bf16 forms: the fp32 kernels above on widened copies (one workspace allocation), the results
// rounded. The widening is exact, so this is the fp32 attention of the bf16 values.
void attention_forward_bf16(const ExecContext& ctx, uint16_t* out, float* lse, const uint16_t* qkv, int64_t B,
                            int64_t T, int64_t H, int64_t Hkv, int64_t D) {
  check_attention_sizes("attention_forward_bf16", B, T, H, Hkv, D);
  const int64_t n_qkv = B * T * (H + 2 * Hkv) * D, n_out = B * T * H * D;
  ThreadScratch wide(n_qkv + n_out, 1);
  float *x = wide.slice(0), *o = x + n_qkv;
  from_bf16(ctx, x, qkv, n_qkv);
  attention_forward(ctx, o, lse, x, B, T, H, Hkv, D);
  to_bf16(ctx, out, o, n_out);
}

void attention_backward_bf16(const ExecContext& ctx, uint16_t* dqkv, const uint16_t* dout, const uint16_t* qkv,
                             const uint16_t* out, const float* lse, int64_t B, int64_t T, int64_t H, int64_t Hkv,
                             int64_t D) {
  check_attention_sizes("attention_backward_bf16", B, T, H, Hkv, D);
  const int64_t n_qkv = B * T * (H + 2 * Hkv) * D, n_out = B * T * H * D;
  ThreadScratch wide(2 * n_qkv + 2 * n_out, 1);
  float *x = wide.slice(0), *dx = x + n_qkv, *o = dx + n_qkv, *d = o + n_out;
  from_bf16(ctx, x, qkv, n_qkv);
  from_bf16(ctx, o, out, n_out);
  from_bf16(ctx, d, dout, n_out);
  attention_backward(ctx, dx, d, x, o, lse, B, T, H, Hkv, D);
  to_bf16(ctx, dqkv, dx, n_qkv);
}

}  // namespace ft::cpu

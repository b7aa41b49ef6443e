// Causal grouped-query attention on the CPU, flash-attention style (forward and backward).
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
// vector lanes; all products run on the micro-kernel of attention_gemm.h.
//
// Memory: no (T, T) matrix. Scratch per thread, with Dp = D rounded up to 16:
//   forward  Qᵀ (D, kBr) + Sᵀ (kBc, kBr) + O (kBr, Dp) + 3 kBr     — 80 KiB at D = 128
//   backward Qᵀ, dOᵀ (D, kBr) + Pᵀ, dSᵀ (kBc, kBr) + dQ (kBr, Dp) + dK, dV (kBc, Dp) + 2 kBr
//                                                                    — 192 KiB at D = 128
//   plus one shared D_i array of B·H·T floats in backward (the size of lse).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/attention_checks.h"
#include "kernels/cpu/thread_scratch.h"
#include "kernels/ops.h"

#if defined(__AVX512F__)
#include "kernels/cpu/attention_gemm.h"
#endif

namespace ft::cpu {

namespace {

#if defined(__AVX512F__)
using namespace attn;

#ifndef FT_ATTN_BR
#define FT_ATTN_BR 64
#define FT_ATTN_BC 64
#endif
constexpr int64_t kBr = FT_ATTN_BR;  // queries per tile: the lanes of Sᵀ (a multiple of 16)
constexpr int64_t kBc = FT_ATTN_BC;  // keys per tile
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

int64_t round16(int64_t x) { return (x + 15) / 16 * 16; }

// Sizes and strides shared by every tile of one call.
struct Geometry {
  int64_t B, T, H, Hkv, D, Dp, row, group, nblk_q, nblk_k;
  float scale;  // 1 / sqrt(D)
  Geometry(int64_t B_, int64_t T_, int64_t H_, int64_t Hkv_, int64_t D_)
      : B(B_), T(T_), H(H_), Hkv(Hkv_), D(D_), Dp(round16(D_)), row((H_ + 2 * Hkv_) * D_),
        group(H_ / Hkv_), nblk_q((T_ + kBr - 1) / kBr), nblk_k((T_ + kBc - 1) / kBc),
        scale(static_cast<float>(1.0 / std::sqrt(static_cast<double>(D_)))) {}
  const float* q(const float* qkv, int64_t b, int64_t t, int64_t h) const {
    return qkv + (b * T + t) * row + h * D;
  }
  const float* k(const float* qkv, int64_t b, int64_t t, int64_t kh) const {
    return qkv + (b * T + t) * row + (H + kh) * D;
  }
  const float* v(const float* qkv, int64_t b, int64_t t, int64_t kh) const {
    return qkv + (b * T + t) * row + (H + Hkv + kh) * D;
  }
};

// Requests n rows of D floats at stride ld into the cache at once: rows of qkv lie pages
// apart, where the hardware prefetchers do not follow, and copying them one by one would pay
// the memory latency per row.
void prefetch_rows(const float* p, int64_t ld, int64_t n, int64_t D, int hint) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = 0; d < D; d += 16) {
      const char* a = reinterpret_cast<const char*>(p + i * ld + d);
      if (hint == 0) _mm_prefetch(a, _MM_HINT_T0); else _mm_prefetch(a, _MM_HINT_T1);
    }
}

// dst(D, kBr) = c · src(br rows of stride ld, D)ᵀ; lanes br..round16(br) zero.
void pack_transposed(float* dst, const float* src, int64_t ld, int64_t br, int64_t D, float c) {
  const int64_t brp = round16(br);
  prefetch_rows(src, ld, br, D, 0);
  for (int64_t d = 0; d < D; ++d)
    for (int64_t i = br; i < brp; ++i) dst[d * kBr + i] = 0.0f;
  for (int64_t i = 0; i < br; ++i)
    for (int64_t d = 0; d < D; ++d) dst[d * kBr + i] = c * src[i * ld + d];
}

// dst(n, ld_dst) = src(n rows of stride ld_src, D). Rows of q, k, v sit (H + 2 Hkv)·D floats
// apart in qkv, a multiple of 4 KiB for common shapes: as B or A operands they would all fall
// into the same few L1 sets. Packed, a tile's operands stay in L1.
void pack_rows(float* dst, int64_t ld_dst, const float* src, int64_t ld_src, int64_t n,
               int64_t D) {
  prefetch_rows(src, ld_src, n, D, 0);
  for (int64_t i = 0; i < n; ++i)  // inline: a memcpy call per 256-byte row costs as much
    for (int64_t d = 0; d < D; d += 16) {
      const __mmask16 m = lanes(D - d);
      _mm512_mask_storeu_ps(dst + i * ld_dst + d, m, _mm512_maskz_loadu_ps(m, src + i * ld_src + d));
    }
}

// Lanes i of a query vector that key j may attend (j <= i), for a tile on the diagonal.
inline __mmask16 causal_lanes(int64_t i_first, int64_t j) {
  const __m512i iv = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(i_first)),
                                      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
                                                        12, 13, 14, 15));
  return _mm512_cmp_epi32_mask(iv, _mm512_set1_epi32(static_cast<int>(j)), _MM_CMPINT_NLT);
}

// ---- forward ------------------------------------------------------------------------------

struct FwdScratch {
  float *qt, *st, *o, *kp, *vp, *m, *l, *alpha;
  static int64_t floats(const Geometry& g) {
    return g.D * kBr + kBc * kBr + kBr * g.Dp + 2 * kBc * g.Dp + 3 * kBr;
  }
  FwdScratch(float* p, const Geometry& g)
      : qt(p), st(qt + g.D * kBr), o(st + kBc * kBr), kp(o + kBr * g.Dp), vp(kp + kBc * g.Dp),
        m(vp + kBc * g.Dp), l(m + kBr), alpha(l + kBr) {}
};

// Online softmax over one tile: Sᵀ (bc, kBr) → Pᵀ in place; updates m, l; alpha = rescale.
void softmax_tile(FwdScratch& s, int64_t bc, int64_t brp, int64_t i0, int64_t j0, bool diag) {
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t v = 0; v < brp; v += 16) {
    const __m512 m_old = _mm512_loadu_ps(s.m + v);
    __m512 mx = m_old;
    for (int64_t j = 0; j < bc; ++j) {
      __m512 x = _mm512_loadu_ps(s.st + j * kBr + v);
      if (diag) x = _mm512_mask_mov_ps(neg_inf, causal_lanes(i0 + v, j0 + j), x);
      mx = _mm512_max_ps(mx, x);
    }
    const __m512 alpha = exp2_ps(_mm512_sub_ps(m_old, mx));
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < bc; ++j) {
      float* sp = s.st + j * kBr + v;
      __m512 p = exp2_ps(_mm512_sub_ps(_mm512_loadu_ps(sp), mx));
      if (diag) p = _mm512_maskz_mov_ps(causal_lanes(i0 + v, j0 + j), p);
      _mm512_storeu_ps(sp, p);
      sum = _mm512_add_ps(sum, p);
    }
    _mm512_storeu_ps(s.l + v, _mm512_fmadd_ps(_mm512_loadu_ps(s.l + v), alpha, sum));
    _mm512_storeu_ps(s.m + v, mx);
    _mm512_storeu_ps(s.alpha + v, alpha);
  }
}

void forward_block(float* out, float* lse, const float* qkv, const Geometry& g, int64_t b,
                   int64_t h, int64_t i0, FwdScratch& s) {
  const int64_t br = std::min(kBr, g.T - i0), brp = round16(br), kh = h / g.group;
  pack_transposed(s.qt, g.q(qkv, b, i0, h), g.row, br, g.D, g.scale * kLog2e);
  for (int64_t i = 0; i < kBr; ++i) {
    s.m[i] = -std::numeric_limits<float>::infinity();
    s.l[i] = 0.0f;
  }
  std::memset(s.o, 0, sizeof(float) * static_cast<size_t>(br * g.Dp));
  for (int64_t j0 = 0; j0 < i0 + br; j0 += kBc) {
    const int64_t bc = std::min(kBc, g.T - j0);
    const bool diag = j0 + bc - 1 > i0;  // some key of the tile is right of some query
    const Causal c_s = diag ? Causal::kColsFrom : Causal::kNone;
    const Causal c_o = diag ? Causal::kKUpTo : Causal::kNone;
    pack_rows(s.kp, g.Dp, g.k(qkv, b, j0, kh), g.row, bc, g.D);
    pack_rows(s.vp, g.Dp, g.v(qkv, b, j0, kh), g.row, bc, g.D);
    gemm_bcast({s.st, kBr}, {s.kp, g.Dp, 1}, {s.qt, kBr}, bc, brp, g.D, Init::kZero, nullptr, c_s,
               j0 - i0);
    softmax_tile(s, bc, brp, i0, j0, diag);
    gemm_bcast({s.o, g.Dp}, {s.st, 1, kBr}, {s.vp, g.Dp}, br, g.D, bc,
               Init::kLoadScaled, s.alpha, c_o, i0 - j0);
  }
  for (int64_t i = 0; i < br; ++i) {
    const float inv = 1.0f / s.l[i];
    float* o = out + (b * g.T + i0 + i) * g.H * g.D + h * g.D;
    for (int64_t d = 0; d < g.D; ++d) o[d] = s.o[i * g.Dp + d] * inv;
    lse[(b * g.H + h) * g.T + i0 + i] = (s.m[i] + std::log2(s.l[i])) * kLn2;
  }
}

// ---- backward -----------------------------------------------------------------------------

struct BwdScratch {
  float *qt, *dot, *qn, *don, *pt, *dst, *dq, *kp, *vp, *dk, *dv, *lse2, *delta;
  static int64_t floats(const Geometry& g) {
    return 2 * g.D * kBr + 3 * kBr * g.Dp + 2 * kBc * kBr + 4 * kBc * g.Dp + 2 * kBr;
  }
  BwdScratch(float* p, const Geometry& g)
      : qt(p), dot(qt + g.D * kBr), qn(dot + g.D * kBr), don(qn + kBr * g.Dp),
        pt(don + kBr * g.Dp), dst(pt + kBc * kBr), dq(dst + kBc * kBr), kp(dq + kBr * g.Dp),
        vp(kp + kBc * g.Dp), dk(vp + kBc * g.Dp), dv(dk + kBc * g.Dp), lse2(dv + kBc * g.Dp),
        delta(lse2 + kBr) {}
  // Packs the key and value rows of tile j0 into kp, vp.
  void pack_kv(const Geometry& g, const float* qkv, int64_t b, int64_t kh, int64_t j0) {
    const int64_t bc = std::min(kBc, g.T - j0);
    pack_rows(kp, g.Dp, g.k(qkv, b, j0, kh), g.row, bc, g.D);
    pack_rows(vp, g.Dp, g.v(qkv, b, j0, kh), g.row, bc, g.D);
  }
};

// A query block packed for backward: Qᵀ scaled into the log2 domain, dOᵀ, Q and dO rows,
// lse · log2 e, D_i.
struct QBlock {
  int64_t b, h, i0, br, brp;
};

QBlock pack_query_block(BwdScratch& s, const Geometry& g, const float* dout, const float* qkv,
                        const float* lse, const float* delta, int64_t b, int64_t h, int64_t i0) {
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

// Where one tile's gradients go: null pointers skip that product.
struct GradOut {
  float* dq;  // (br, D) rows of stride ldq, accumulated
  int64_t ldq;
  float *dk, *dv;  // (bc, D) rows of stride ldkv, accumulated
  int64_t ldkv;
};

// One (query block, key block) tile; the key block j0 is packed in s.kp, s.vp.
void backward_tile(BwdScratch& s, const QBlock& qb, const Geometry& g, int64_t j0,
                   const GradOut& go) {
  const int64_t bc = std::min(kBc, g.T - j0), br = qb.br, brp = qb.brp, i0 = qb.i0;
  const bool diag = j0 + bc - 1 > i0;
  const Causal c_cols = diag ? Causal::kColsFrom : Causal::kNone;
  const Causal c_kfrom = diag ? Causal::kKFrom : Causal::kNone;
  const Causal c_kupto = diag ? Causal::kKUpTo : Causal::kNone;

  // Pᵀ = exp2(K Qᵀ − lse2)
  gemm_bcast({s.pt, kBr}, {s.kp, g.Dp, 1}, {s.qt, kBr}, bc, brp, g.D, Init::kZero, nullptr, c_cols,
             j0 - i0);
  for (int64_t j = 0; j < bc; ++j) {
    for (int64_t v = 0; v < brp; v += 16) {
      float* p = s.pt + j * kBr + v;
      __m512 x = exp2_ps(_mm512_sub_ps(_mm512_loadu_ps(p), _mm512_loadu_ps(s.lse2 + v)));
      if (diag) x = _mm512_maskz_mov_ps(causal_lanes(i0 + v, j0 + j), x);
      _mm512_storeu_ps(p, x);
    }
  }
  if (go.dv)
    gemm_bcast({go.dv, go.ldkv}, {s.pt, kBr, 1}, {s.don, g.Dp}, bc, g.D, br, Init::kLoad,
               nullptr, c_kfrom, j0 - i0);
  // dSᵀ = Pᵀ ∘ (V dOᵀ − D_i) · scale
  gemm_bcast({s.dst, kBr}, {s.vp, g.Dp, 1}, {s.dot, kBr}, bc, brp, g.D, Init::kZero, nullptr, c_cols,
             j0 - i0);
  const __m512 scale = _mm512_set1_ps(g.scale);
  for (int64_t j = 0; j < bc; ++j) {
    for (int64_t v = 0; v < brp; v += 16) {
      float* ds = s.dst + j * kBr + v;
      __m512 dp = _mm512_sub_ps(_mm512_loadu_ps(ds), _mm512_loadu_ps(s.delta + v));
      __m512 x = _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(s.pt + j * kBr + v), dp), scale);
      if (diag) x = _mm512_maskz_mov_ps(causal_lanes(i0 + v, j0 + j), x);
      _mm512_storeu_ps(ds, x);
    }
  }
  if (go.dk)
    gemm_bcast({go.dk, go.ldkv}, {s.dst, kBr, 1}, {s.qn, g.Dp}, bc, g.D, br, Init::kLoad, nullptr,
               c_kfrom, j0 - i0);
  if (go.dq)
    gemm_bcast({go.dq, go.ldq}, {s.dst, 1, kBr}, {s.kp, g.Dp}, br, g.D, bc, Init::kLoad, nullptr,
               c_kupto, i0 - j0);
}

// D_i = rowsum(dO ∘ O) for every (b, h, t): (B, H, T) like lse.
void compute_delta(float* delta, const float* dout, const float* out, const Geometry& g) {
#pragma omp parallel for schedule(static)
  for (int64_t bt = 0; bt < g.B * g.T; ++bt) {
    const int64_t b = bt / g.T, t = bt % g.T;
    for (int64_t h = 0; h < g.H; ++h) {
      const float* x = dout + bt * g.H * g.D + h * g.D;
      const float* y = out + bt * g.H * g.D + h * g.D;
      __m512 acc = _mm512_setzero_ps();
      for (int64_t d = 0; d < g.D; d += 16) {
        const __mmask16 m = lanes(g.D - d);
        acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + d), _mm512_maskz_loadu_ps(m, y + d), acc);
      }
      delta[(b * g.H + h) * g.T + t] = _mm512_reduce_add_ps(acc);
    }
  }
}

void copy_rows(float* dst, int64_t ld_dst, const float* src, int64_t ld_src, int64_t n, int64_t D) {
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(dst + i * ld_dst, src + i * ld_src, sizeof(float) * static_cast<size_t>(D));
}

// Fused schedule: task (b, kv head) owns dK, dV of the kv head and dQ of its query heads.
void backward_fused(float* dqkv, const float* dout, const float* qkv, const float* lse,
                    const float* delta, const Geometry& g) {
  ThreadScratch buf(BwdScratch::floats(g));
#pragma omp parallel
  {
    BwdScratch s(buf.slice(omp_get_thread_num()), g);
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < g.B * g.Hkv; ++task) {
      const int64_t b = task / g.Hkv, kh = task % g.Hkv;
      float* dk = dqkv + b * g.T * g.row + (g.H + kh) * g.D;
      float* dv = dqkv + b * g.T * g.row + (g.H + g.Hkv + kh) * g.D;
      for (int64_t t = 0; t < g.T; ++t) {
        std::memset(dk + t * g.row, 0, sizeof(float) * static_cast<size_t>(g.D));
        std::memset(dv + t * g.row, 0, sizeof(float) * static_cast<size_t>(g.D));
      }
      for (int64_t h = kh * g.group; h < (kh + 1) * g.group; ++h) {
        for (int64_t i0 = 0; i0 < g.T; i0 += kBr) {
          QBlock qb = pack_query_block(s, g, dout, qkv, lse, delta, b, h, i0);
          std::memset(s.dq, 0, sizeof(float) * static_cast<size_t>(qb.br * g.Dp));
          for (int64_t j0 = 0; j0 < i0 + qb.br; j0 += kBc) {
            s.pack_kv(g, qkv, b, kh, j0);
            backward_tile(s, qb, g, j0, {s.dq, g.Dp, dk + j0 * g.row, dv + j0 * g.row, g.row});
          }
          copy_rows(dqkv + (b * g.T + i0) * g.row + h * g.D, g.row, s.dq, g.Dp, qb.br, g.D);
        }
      }
    }
  }
}

// Two passes for when (b, kv head) tasks are too few to keep the threads busy.
void backward_two_pass(float* dqkv, const float* dout, const float* qkv, const float* lse,
                       const float* delta, const Geometry& g) {
  ThreadScratch buf(BwdScratch::floats(g));
#pragma omp parallel
  {
    BwdScratch s(buf.slice(omp_get_thread_num()), g);
    // dK, dV per (b, kv head, key block); the first key blocks see the most queries: go first.
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < g.nblk_k * g.B * g.Hkv; ++task) {
      const int64_t j0 = (task / (g.B * g.Hkv)) * kBc, b = (task % (g.B * g.Hkv)) / g.Hkv,
                    kh = task % g.Hkv, bc = std::min(kBc, g.T - j0);
      s.pack_kv(g, qkv, b, kh, j0);
      std::memset(s.dk, 0, sizeof(float) * static_cast<size_t>(bc * g.Dp));
      std::memset(s.dv, 0, sizeof(float) * static_cast<size_t>(bc * g.Dp));
      for (int64_t h = kh * g.group; h < (kh + 1) * g.group; ++h) {
        for (int64_t i0 = j0 / kBr * kBr; i0 < g.T; i0 += kBr) {
          QBlock qb = pack_query_block(s, g, dout, qkv, lse, delta, b, h, i0);
          backward_tile(s, qb, g, j0, {nullptr, 0, s.dk, s.dv, g.Dp});
        }
      }
      float* base = dqkv + (b * g.T + j0) * g.row;
      copy_rows(base + (g.H + kh) * g.D, g.row, s.dk, g.Dp, bc, g.D);
      copy_rows(base + (g.H + g.Hkv + kh) * g.D, g.row, s.dv, g.Dp, bc, g.D);
    }
    // dQ per (b, head, query block); the last query blocks see the most keys: go first.
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < g.nblk_q * g.B * g.H; ++task) {
      const int64_t i0 = (g.nblk_q - 1 - task / (g.B * g.H)) * kBr,
                    b = (task % (g.B * g.H)) / g.H, h = task % g.H;
      QBlock qb = pack_query_block(s, g, dout, qkv, lse, delta, b, h, i0);
      std::memset(s.dq, 0, sizeof(float) * static_cast<size_t>(qb.br * g.Dp));
      for (int64_t j0 = 0; j0 < i0 + qb.br; j0 += kBc) {
        s.pack_kv(g, qkv, b, h / g.group, j0);
        backward_tile(s, qb, g, j0, {s.dq, g.Dp, nullptr, nullptr, 0});
      }
      copy_rows(dqkv + (b * g.T + i0) * g.row + h * g.D, g.row, s.dq, g.Dp, qb.br, g.D);
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
#endif  // __AVX512F__

}  // namespace

void attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t T, int64_t H,
                       int64_t Hkv, int64_t D) {
  check_attention_sizes("attention_forward", B, T, H, Hkv, D);
#if defined(__AVX512F__)
  const Geometry g(B, T, H, Hkv, D);
  const int64_t ntasks = g.nblk_q * B * H;
  ThreadScratch buf(FwdScratch::floats(g));
#pragma omp parallel
  {
    FwdScratch s(buf.slice(omp_get_thread_num()), g);
    // Consecutive tasks share a head, so its keys and values stay in cache; within a head the
    // last query blocks attend to the most keys: hand them out first.
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < ntasks; ++task) {
      const int64_t bh = task / g.nblk_q, b = bh / H, h = bh % H;
      const int64_t i0 = (g.nblk_q - 1 - task % g.nblk_q) * kBr;
      forward_block(out, lse, qkv, g, b, h, i0, s);
    }
  }
#else
  ref::attention_forward(out, lse, qkv, B, T, H, Hkv, D);  // portable build: the reference
#endif
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int64_t B, int64_t T, int64_t H, int64_t Hkv,
                        int64_t D) {
  check_attention_sizes("attention_backward", B, T, H, Hkv, D);
#if defined(__AVX512F__)
  const Geometry g(B, T, H, Hkv, D);
  ThreadScratch delta(B * H * T, 1);  // one shared (B, H, T) array
  compute_delta(delta.slice(0), dout, out, g);
  if (use_fused_backward(g))
    backward_fused(dqkv, dout, qkv, lse, delta.slice(0), g);
  else
    backward_two_pass(dqkv, dout, qkv, lse, delta.slice(0), g);
#else
  ref::attention_backward(dqkv, dout, qkv, out, lse, B, T, H, Hkv, D);
#endif
}

}  // namespace ft::cpu

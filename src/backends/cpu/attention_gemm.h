// Building blocks of the tiled attention kernels (backends/cpu/attention*.cpp only), on the
// 16-lane vectors of simd.h (AVX-512, AVX2 or portable).
//
// Every product in flash attention — S = K Qᵀ, O += P V, dV += Pᵀ dO, dP = V dOᵀ,
// dK += dSᵀ Q, dQ += dS K — is one shape: C(M, N) (+)= A(M, K) · B(K, N) where B's rows are
// contiguous vectors (loaded 16 floats at a time) and A is read one scalar at a time
// (broadcast), at any strides. So a single register-blocked micro-kernel serves all six:
//
//   attn::gemm_bcast({C, ldc}, {A, sar, sak}, {B, ldb}, M, N, K, attn::Init::kZero, nullptr,
//                    attn::Causal::kNone, 0);
//
// Causal modes let the caller skip the part of a diagonal tile that the mask zeroes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

#include "backends/cpu/simd.h"

namespace ft::cpu::attn {

using namespace simd;

// 2^t for t <= 0 (all attention needs: scores minus their max or their log-sum-exp).
// Inputs below -160 (and -inf) give exactly 0; NaN stays NaN. Relative error < 2e-7.
inline F32x16 exp2_nonpos(F32x16 t) {
  t = max(set1(-160.0f), t);  // max(c, NaN) returns NaN
  const F32x16 n = round(t);
  const F32x16 f = t - n;  // in [-0.5, 0.5]
  // Degree-5 fit of 2^f on [-0.5, 0.5], minimax in relative error.
  F32x16 p = set1(1.3264727e-03f);
  p = fmadd(p, f, set1(9.6715130e-03f));
  p = fmadd(p, f, set1(5.5507336e-02f));
  p = fmadd(p, f, set1(2.4022242e-01f));
  p = fmadd(p, f, set1(6.9314700e-01f));
  p = fmadd(p, f, set1(1.0f));
  return scale_pow2(p, n);
}

enum class Init : uint8_t {
  kZero,        // C = A·B
  kLoad,        // C += A·B
  kLoadScaled,  // C = C * row_scale[m] + A·B   (the online-softmax rescale of O)
};

// Which (m, k) or (m, n) entries a diagonal tile needs; `off` is the offset between the row
// and column/k index spaces (see attention.cpp). Skipping is by whole row groups and, for
// columns, whole 16-lane vectors: entries inside a kept block must already be zero (masked).
enum class Causal : uint8_t {
  kNone,
  kColsFrom,  // row m needs columns n >= m + off        (S = K Qᵀ: rows keys, columns queries)
  kKUpTo,     // row m needs k <= m + off                (O += P V, dQ += dS K: rows queries)
  kKFrom,     // row m needs k >= m + off                (dV += Pᵀ dO, dK += dSᵀ Q: rows keys)
};

struct MatC {
  float* p;
  int64_t ld;
};
struct MatA {  // element (m, k) at p[m * sm + k * sk]
  const float* p;
  int64_t sm, sk;
};
struct MatB {  // row k at p + k * ld, contiguous along n
  const float* p;
  int64_t ld;
};

// Register blocking: R rows x NV vectors of C in registers. AVX-512 (32 registers): 6 x 4
// vectors = 24 accumulators. AVX2 (16 registers, a vector is two): 6 x 1 = 12 accumulators,
// 2 for the B row and 1 for the broadcast.
#if defined(__AVX512F__)
constexpr int kRows = 6;
constexpr int kMaxVecs = 4;  // columns per micro-kernel call: up to 64 floats
#else
constexpr int kRows = 6;
constexpr int kMaxVecs = 1;
#endif

// R rows x NV vectors of C; with kTail the last vector is masked by `tail`. (The unroll pragmas
// let GCC keep acc in registers instead of storing it to the stack every k.)
#define FT_UNROLL _Pragma("GCC unroll 16")
template <int R, int NV, bool kTail>
void micro_kernel(MatC c, MatA a, MatB b, int64_t K, Init init, const float* row_scale, Mask16 tail) {
  F32x16 acc[R][NV];
  FT_UNROLL for (int r = 0; r < R; ++r) {
    FT_UNROLL for (int v = 0; v < NV; ++v) {
      if (init == Init::kZero) {
        acc[r][v] = zero();
      } else {
        const float* cp = c.p + r * c.ld + v * 16;
        acc[r][v] = kTail && v == NV - 1 ? load(cp, tail) : load(cp);
        if (init == Init::kLoadScaled) acc[r][v] = acc[r][v] * set1(row_scale[r]);
      }
    }
  }
  const float* ap = a.p;
  const float* bp = b.p;
  for (int64_t k = 0; k < K; ++k) {
    F32x16 bv[NV];
    FT_UNROLL for (int v = 0; v < NV; ++v) {
      bv[v] = kTail && v == NV - 1 ? load(bp + v * 16, tail) : load(bp + v * 16);
    }
    FT_UNROLL for (int r = 0; r < R; ++r) {
      const F32x16 av = set1(ap[r * a.sm]);
      FT_UNROLL for (int v = 0; v < NV; ++v) acc[r][v] = fmadd(av, bv[v], acc[r][v]);
    }
    ap += a.sk;
    bp += b.ld;
  }
  FT_UNROLL for (int r = 0; r < R; ++r) {
    FT_UNROLL for (int v = 0; v < NV; ++v) {
      float* cp = c.p + r * c.ld + v * 16;
      if (kTail && v == NV - 1)
        store(cp, acc[r][v], tail);
      else
        store(cp, acc[r][v]);
    }
  }
}
#undef FT_UNROLL

using MicroFn = void (*)(MatC, MatA, MatB, int64_t, Init, const float*, Mask16);

namespace detail {
struct Table {
  MicroFn f[kRows][kMaxVecs][2];  // [rows - 1][vectors - 1][last vector masked]
};
template <int... I>
constexpr Table make_table(std::integer_sequence<int, I...>) {
  Table t{};
  ((t.f[I / kMaxVecs][I % kMaxVecs][0] = &micro_kernel<I / kMaxVecs + 1, I % kMaxVecs + 1, false>,
    t.f[I / kMaxVecs][I % kMaxVecs][1] = &micro_kernel<I / kMaxVecs + 1, I % kMaxVecs + 1, true>),
   ...);
  return t;
}
inline constexpr Table kTable = make_table(std::make_integer_sequence<int, kRows * kMaxVecs>{});
}  // namespace detail

// C(M, N) (init) A(M, K) · B(K, N), skipping what `causal` says the rows do not need.
inline void gemm_bcast(MatC c, MatA a, MatB b, int64_t M, int64_t N, int64_t K, Init init, const float* row_scale,
                       Causal causal, int64_t off) {
  for (int64_t n0 = 0; n0 < N; n0 += 16 * kMaxVecs) {
    const int64_t n_end = std::min(N, n0 + 16 * kMaxVecs);
    for (int64_t m0 = 0; m0 < M; m0 += kRows) {
      const int r = static_cast<int>(std::min<int64_t>(kRows, M - m0));
      int64_t ns = n0, k0 = 0, k1 = K;
      if (causal == Causal::kColsFrom) {
        const int64_t first = m0 + off;  // columns below `first` are masked for every row
        if (first > ns) ns = std::max(ns, first / 16 * 16);
        if (ns >= n_end) continue;  // nothing needed; the caller masks these entries
      } else if (causal == Causal::kKUpTo) {
        k1 = std::clamp<int64_t>(m0 + r + off, 0, K);  // last row needs k <= m0 + r - 1 + off
      } else if (causal == Causal::kKFrom) {
        k0 = std::clamp<int64_t>(m0 + off, 0, K);  // first row needs k >= m0 + off
      }
      const int nv = static_cast<int>((n_end - ns + 15) / 16);
      const int64_t last = n_end - ns - 16 * (nv - 1);  // lanes of the last vector
      MatC cc{c.p + m0 * c.ld + ns, c.ld};
      MatA aa{a.p + m0 * a.sm + k0 * a.sk, a.sm, a.sk};
      MatB bb{b.p + k0 * b.ld + ns, b.ld};
      detail::kTable.f[r - 1][nv - 1][last < 16](cc, aa, bb, k1 - k0, init, row_scale ? row_scale + m0 : nullptr,
                                                 lanes(last));
    }
  }
}

}  // namespace ft::cpu::attn

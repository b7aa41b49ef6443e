// Block attention for the context-parallel ring (see attention_block.h): plain loops, one query
// row at a time, parallel over (sequence, head) in forward and over (sequence, kv head) in
// backward, so that no two threads write the same dk, dv or dq rows. The rows a query sees are a
// prefix of the block (positions ascend); the loops stop there.
#include "backends/cpu/attention_block.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/ops.h"
#include "util/error.h"

namespace ft::cpu {

namespace {

// Keys of the block query position p sees: those at positions <= p (a prefix).
int64_t visible(const int64_t* pos_k, int64_t Tk, int64_t p) {
  return std::upper_bound(pos_k, pos_k + Tk, p) - pos_k;
}

float dot(const float* a, const float* b, int64_t D) {
  float s = 0;
  for (int64_t d = 0; d < D; ++d) s += a[d] * b[d];
  return s;
}

void check_sizes(int64_t H, int64_t Hkv, int64_t D) {
  FT_CHECK(H > 0 && Hkv > 0 && H % Hkv == 0 && D > 0, "block attention: H = {}, Hkv = {}, D = {}", H, Hkv, D);
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
  const int64_t row = (H + 2 * Hkv) * D, kv_row = 2 * Hkv * D, group = H / Hkv;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
#pragma omp parallel
  {
    std::vector<float> s(static_cast<size_t>(Tk)), o(static_cast<size_t>(D));
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t h = 0; h < H; ++h) {
        const int64_t kh = h / group;
        const float* k = kv + b * Tk * kv_row + kh * D;
        const float* v = kv + b * Tk * kv_row + (Hkv + kh) * D;
        for (int64_t i = 0; i < Tq; ++i) {
          const int64_t n = visible(pos_k, Tk, pos_q[i]);
          if (n == 0) continue;
          const float* q = qkv + (b * Tq + i) * row + h * D;
          float m = -std::numeric_limits<float>::infinity();
          for (int64_t j = 0; j < n; ++j) {
            s[static_cast<size_t>(j)] = dot(q, k + j * kv_row, D) * scale;
            m = std::max(m, s[static_cast<size_t>(j)]);
          }
          float sum = 0;
          std::fill(o.begin(), o.end(), 0.0f);
          for (int64_t j = 0; j < n; ++j) {
            const float p = std::exp(s[static_cast<size_t>(j)] - m);
            sum += p;
            const float* vj = v + j * kv_row;
            for (int64_t d = 0; d < D; ++d) o[static_cast<size_t>(d)] += p * vj[d];
          }
          const float l = m + std::log(sum);
          float* out_i = out + (b * Tq + i) * H * D + h * D;
          float& lse_i = lse[(b * H + h) * Tq + i];
          if (std::isinf(lse_i)) {  // the first keys this query sees
            for (int64_t d = 0; d < D; ++d) out_i[d] = o[static_cast<size_t>(d)] / sum;
            lse_i = l;
            continue;
          }
          const float mx = std::max(lse_i, l), a = std::exp(lse_i - mx), c = std::exp(l - mx), ac = a + c;
          for (int64_t d = 0; d < D; ++d) out_i[d] = (a * out_i[d] + c * o[static_cast<size_t>(d)] / sum) / ac;
          lse_i = mx + std::log(ac);
        }
      }
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
        delta[(b * H + h) * Tq + i] = dot(dout + at, out + at, D);
      }
}

void attention_block_backward(float* dqkv, float* dkv, const float* dout, const float* qkv, const float* kv,
                              const float* lse, const float* delta, const int64_t* pos_q, const int64_t* pos_k,
                              int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv, int64_t D) {
  check_sizes(H, Hkv, D);
  if (Tk == 0 || Tq == 0 || pos_k[0] > pos_q[Tq - 1]) return;
  const int64_t row = (H + 2 * Hkv) * D, kv_row = 2 * Hkv * D, group = H / Hkv;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  // One task per (sequence, kv head): it owns that head's dk, dv rows and the dq rows of its group.
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t kh = 0; kh < Hkv; ++kh) {
      const float* k = kv + b * Tk * kv_row + kh * D;
      const float* v = kv + b * Tk * kv_row + (Hkv + kh) * D;
      float* dk = dkv + b * Tk * kv_row + kh * D;
      float* dv = dkv + b * Tk * kv_row + (Hkv + kh) * D;
      for (int64_t h = kh * group; h < (kh + 1) * group; ++h) {
        for (int64_t i = 0; i < Tq; ++i) {
          const int64_t n = visible(pos_k, Tk, pos_q[i]);
          if (n == 0) continue;
          const float* q = qkv + (b * Tq + i) * row + h * D;
          float* dq = dqkv + (b * Tq + i) * row + h * D;
          const float* dO = dout + (b * Tq + i) * H * D + h * D;
          const float l = lse[(b * H + h) * Tq + i], di = delta[(b * H + h) * Tq + i];
          for (int64_t j = 0; j < n; ++j) {
            const float p = std::exp(dot(q, k + j * kv_row, D) * scale - l);
            const float ds = p * (dot(dO, v + j * kv_row, D) - di) * scale;
            float* dkj = dk + j * kv_row;
            float* dvj = dv + j * kv_row;
            const float* kj = k + j * kv_row;
            for (int64_t d = 0; d < D; ++d) {
              dq[d] += ds * kj[d];
              dkj[d] += ds * q[d];
              dvj[d] += p * dO[d];
            }
          }
        }
      }
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

}  // namespace ft::cpu

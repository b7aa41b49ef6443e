// The reference block attention (kernels/op_decls.inc, "Block attention"): one query row at a
// time, every score in double, written for clarity. The fast versions are
// backends/cpu/attention_block.cpp and backends/cuda/attention_block.cu.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention_checks.h"
#include "kernels/ops.h"
#include "tensor/dtype.h"

namespace ft::ref {

namespace {

// The scores (scaled) of query row q against the keys of the block it sees; empty when none.
std::vector<double> block_scores(const float* q, const float* k, int64_t kv_row, const int32_t* pos_k, int64_t Tk,
                                 int32_t pos, int64_t D) {
  std::vector<double> s;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  for (int64_t j = 0; j < Tk && pos_k[j] <= pos; ++j) {
    double dot = 0;
    for (int64_t d = 0; d < D; ++d) dot += static_cast<double>(q[d]) * k[j * kv_row + d];
    s.push_back(dot * scale);
  }
  return s;
}

}  // namespace

void attention_block_forward(const ExecContext&, float* out, float* lse, const float* qkv, const float* kv,
                             const int32_t* pos_q, const int32_t* pos_k, int64_t B, int64_t Tq, int64_t Tk, int64_t H,
                             int64_t Hkv, int64_t D, bool accumulate) {
  check_attention_sizes("attention_block_forward", B, Tq, H, Hkv, D);
  const int64_t row = (H + 2 * Hkv) * D, kv_row = 2 * Hkv * D, group = H / Hkv;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Tq; ++i) {
        const float* k = kv + b * Tk * kv_row + (h / group) * D;
        const float* v = k + Hkv * D;
        const std::vector<double> s = block_scores(qkv + (b * Tq + i) * row + h * D, k, kv_row, pos_k, Tk, pos_q[i], D);
        float* o = out + (b * Tq + i) * H * D + h * D;
        float& l_out = lse[(b * H + h) * Tq + i];
        if (s.empty()) {  // no key of the block is visible
          if (!accumulate) {
            for (int64_t d = 0; d < D; ++d) o[d] = 0;
            l_out = -std::numeric_limits<float>::infinity();
          }
          continue;
        }
        double m = s[0];
        for (double x : s) m = std::max(m, x);
        double sum = 0;
        std::vector<double> acc(static_cast<size_t>(D), 0.0);
        for (size_t j = 0; j < s.size(); ++j) {
          const double p = std::exp(s[j] - m);
          sum += p;
          for (int64_t d = 0; d < D; ++d) acc[static_cast<size_t>(d)] += p * v[static_cast<int64_t>(j) * kv_row + d];
        }
        const double l = m + std::log(sum);
        // The weights of what out held (a) and of this block (c); a = 0 when nothing was held.
        const double old = accumulate ? static_cast<double>(l_out) : -INFINITY;
        const double mx = std::max(old, l), a = std::exp(old - mx), c = std::exp(l - mx);
        for (int64_t d = 0; d < D; ++d) {
          const double held = accumulate && a > 0 ? static_cast<double>(o[d]) : 0.0;
          o[d] = static_cast<float>((a * held + c * acc[static_cast<size_t>(d)] / sum) / (a + c));
        }
        l_out = static_cast<float>(mx + std::log(a + c));
      }
}

void attention_block_backward(const ExecContext&, float* dqkv, float* dkv, const float* dout, const float* qkv,
                              const float* kv, const float* out, const float* lse, const int32_t* pos_q,
                              const int32_t* pos_k, int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv,
                              int64_t D) {
  check_attention_sizes("attention_block_backward", B, Tq, H, Hkv, D);
  const int64_t row = (H + 2 * Hkv) * D, kv_row = 2 * Hkv * D, group = H / Hkv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Tq; ++i) {
        const int64_t kh = h / group;
        const float* q = qkv + (b * Tq + i) * row + h * D;
        const float* k = kv + b * Tk * kv_row + kh * D;
        const float* v = k + Hkv * D;
        const float* dO = dout + (b * Tq + i) * H * D + h * D;
        const float* O = out + (b * Tq + i) * H * D + h * D;
        const std::vector<double> s = block_scores(q, k, kv_row, pos_k, Tk, pos_q[i], D);
        if (s.empty()) continue;
        double delta = 0;
        for (int64_t d = 0; d < D; ++d) delta += static_cast<double>(dO[d]) * O[d];
        const double l = lse[(b * H + h) * Tq + i];
        float* dq = dqkv + (b * Tq + i) * row + h * D;
        float* dk = dkv + b * Tk * kv_row + kh * D;
        float* dv = dk + Hkv * D;
        for (size_t jj = 0; jj < s.size(); ++jj) {
          const int64_t j = static_cast<int64_t>(jj);
          const double p = std::exp(s[jj] - l);
          double dp = 0;
          for (int64_t d = 0; d < D; ++d) dp += static_cast<double>(dO[d]) * v[j * kv_row + d];
          const double ds = p * (dp - delta) * scale;
          for (int64_t d = 0; d < D; ++d) {
            dq[d] += static_cast<float>(ds * k[j * kv_row + d]);
            dk[j * kv_row + d] += static_cast<float>(ds * q[d]);
            dv[j * kv_row + d] += static_cast<float>(p * dO[d]);
          }
        }
      }
}

// The bf16 forms: the fp32 reference on the widened (exact) inputs; dkv widened, added to, rounded.
namespace {
std::vector<float> widen(const uint16_t* x, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = bf16_to_f32(x[i]);
  return out;
}
}  // namespace

void attention_block_forward_bf16(const ExecContext& ctx, float* out, float* lse, const uint16_t* qkv,
                                  const uint16_t* kv, const int32_t* pos_q, const int32_t* pos_k, int64_t B, int64_t Tq,
                                  int64_t Tk, int64_t H, int64_t Hkv, int64_t D, bool accumulate) {
  const std::vector<float> q = widen(qkv, B * Tq * (H + 2 * Hkv) * D), k = widen(kv, B * Tk * 2 * Hkv * D);
  attention_block_forward(ctx, out, lse, q.data(), k.data(), pos_q, pos_k, B, Tq, Tk, H, Hkv, D, accumulate);
}

void attention_block_backward_bf16(const ExecContext& ctx, float* dqkv, uint16_t* dkv, const uint16_t* dout,
                                   const uint16_t* qkv, const uint16_t* kv, const uint16_t* out, const float* lse,
                                   const int32_t* pos_q, const int32_t* pos_k, int64_t B, int64_t Tq, int64_t Tk,
                                   int64_t H, int64_t Hkv, int64_t D) {
  const int64_t n_kv = B * Tk * 2 * Hkv * D, n_out = B * Tq * H * D;
  const std::vector<float> q = widen(qkv, B * Tq * (H + 2 * Hkv) * D), k = widen(kv, n_kv), d = widen(dout, n_out),
                           o = widen(out, n_out);
  std::vector<float> dk = widen(dkv, n_kv);
  attention_block_backward(ctx, dqkv, dk.data(), d.data(), q.data(), k.data(), o.data(), lse, pos_q, pos_k, B, Tq, Tk,
                           H, Hkv, D);
  for (int64_t i = 0; i < n_kv; ++i) dkv[i] = f32_to_bf16(dk[static_cast<size_t>(i)]);
}

}  // namespace ft::ref

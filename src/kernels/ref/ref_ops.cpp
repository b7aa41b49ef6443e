// ft::ref — the float instantiations of the reference kernels (ref_impl.h), plus the ops that
// have no gradient (elementwise helpers, AdamW).
#include <cmath>
#include <vector>

#include "kernels/attention_checks.h"
#include "kernels/ops.h"
#include "kernels/ref/ref_impl.h"
#include "tensor/dtype.h"

namespace ft::ref {

namespace {
// Rounds to bf16 and back: what a bf16 GEMM input holds.
std::vector<float> round_bf16(const float* x, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(f32_to_bf16(x[i]));
  return out;
}
// Rounds to fp16 and back: what an fp16 GEMM input holds.
std::vector<float> round_f16(const float* x, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(f32_to_f16(x[i]));
  return out;
}
// The bf16-output ops: the fp32 op, then rounding.
void store_bf16(uint16_t* out, const std::vector<float>& x) {
  for (size_t i = 0; i < x.size(); ++i) out[i] = f32_to_bf16(x[i]);
}
// bf16 data widened (exact): the bf16 ops' inputs.
std::vector<float> widen_bf16(const uint16_t* x, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(x[i]);
  return out;
}
int64_t qkv_elems(int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D) {
  return B * T * (H + 2 * Hkv) * D;
}
}  // namespace

void matmul(const ExecContext&, float* C, const float* A, const float* B, int64_t M, int64_t N, int64_t K, bool trans_a,
            bool trans_b, float beta, Precision precision) {
  if (precision == Precision::kBF16) {
    auto a = round_bf16(A, M * K), b = round_bf16(B, K * N);
    return ref_impl::matmul(C, a.data(), b.data(), M, N, K, trans_a, trans_b, beta);
  }
  if (precision == Precision::kF16) {
    auto a = round_f16(A, M * K), b = round_f16(B, K * N);
    return ref_impl::matmul(C, a.data(), b.data(), M, N, K, trans_a, trans_b, beta);
  }
  ref_impl::matmul(C, A, B, M, N, K, trans_a, trans_b, beta);
}

void matmul_bf16(const ExecContext&, float* C, const uint16_t* A, const uint16_t* B, int64_t M, int64_t N, int64_t K,
                 bool trans_a, bool trans_b, float beta) {
  std::vector<float> a(static_cast<size_t>(M * K)), b(static_cast<size_t>(K * N));
  for (int64_t i = 0; i < M * K; ++i) a[i] = bf16_to_f32(A[i]);
  for (int64_t i = 0; i < K * N; ++i) b[i] = bf16_to_f32(B[i]);
  ref_impl::matmul(C, a.data(), b.data(), M, N, K, trans_a, trans_b, beta);
}

void matmul_bf16_add(const ExecContext& ctx, float* D, const float* R, const uint16_t* A, const uint16_t* B, int64_t M,
                     int64_t N, int64_t K, bool trans_a, bool trans_b) {
  std::vector<float> r(R, R + M * N);
  matmul_bf16(ctx, D, A, B, M, N, K, trans_a, trans_b, 0.0f);
  for (int64_t i = 0; i < M * N; ++i) D[i] += r[static_cast<size_t>(i)];
}

void matmul_bf16_rounded(const ExecContext& ctx, uint16_t* C, const uint16_t* A, const uint16_t* B, int64_t M,
                         int64_t N, int64_t K, bool trans_a, bool trans_b) {
  std::vector<float> c(static_cast<size_t>(M * N));
  matmul_bf16(ctx, c.data(), A, B, M, N, K, trans_a, trans_b, 0.0f);
  store_bf16(C, c);
}

void embedding_forward(const ExecContext&, float* out, const int32_t* tokens, const float* table, int64_t N, int64_t C,
                       int64_t v0, int64_t V) {
  ref_impl::embedding_forward(out, tokens, table, N, C, v0, V);
}
void embedding_backward(const ExecContext&, float* dtable, const float* dout, const int32_t* tokens, int64_t N,
                        int64_t C, int64_t v0, int64_t V) {
  ref_impl::embedding_backward(dtable, dout, tokens, N, C, v0, V);
}
void rmsnorm_forward(const ExecContext&, float* out, float* rstd, const float* x, const float* weight, int64_t N,
                     int64_t C, float eps) {
  ref_impl::rmsnorm_forward(out, rstd, x, weight, N, C, eps);
}
void rmsnorm_forward_bf16(const ExecContext&, uint16_t* out, float* rstd, const float* x, const float* weight,
                          int64_t N, int64_t C, float eps) {
  std::vector<float> y(static_cast<size_t>(N * C));
  ref_impl::rmsnorm_forward(y.data(), rstd, x, weight, N, C, eps);
  store_bf16(out, y);
}
void rmsnorm_backward(const ExecContext&, float* dx, float* dweight, const float* dout, const float* dresidual,
                      const float* x, const float* weight, const float* rstd, int64_t N, int64_t C) {
  std::vector<float> d(static_cast<size_t>(N * C));
  ref_impl::rmsnorm_backward(d.data(), dweight, dout, x, weight, rstd, N, C);
  for (int64_t i = 0; i < N * C; ++i) dx[i] = dresidual ? d[static_cast<size_t>(i)] + dresidual[i] : d[i];
}
void rope_forward(const ExecContext&, float* qkv, const float* cos, const float* sin, int64_t B, int64_t T, int64_t H,
                  int64_t Hkv, int64_t D, int64_t pos0) {
  ref_impl::rope_apply(qkv, cos, sin, B, T, H, Hkv, D, pos0, 1.0f);
}
void rope_backward(const ExecContext&, float* dqkv, const float* cos, const float* sin, int64_t B, int64_t T, int64_t H,
                   int64_t Hkv, int64_t D, int64_t pos0) {
  ref_impl::rope_apply(dqkv, cos, sin, B, T, H, Hkv, D, pos0, -1.0f);
}
void rope_forward_bf16(const ExecContext&, uint16_t* qkv16, const uint16_t* qkv, const float* cos, const float* sin,
                       int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D, int64_t pos0) {
  std::vector<float> x = widen_bf16(qkv, qkv_elems(B, T, H, Hkv, D));
  ref_impl::rope_apply(x.data(), cos, sin, B, T, H, Hkv, D, pos0, 1.0f);
  store_bf16(qkv16, x);
}
void rope_backward_bf16(const ExecContext&, uint16_t* dqkv16, const uint16_t* dqkv, const float* cos, const float* sin,
                        int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D, int64_t pos0) {
  std::vector<float> x = widen_bf16(dqkv, qkv_elems(B, T, H, Hkv, D));
  ref_impl::rope_apply(x.data(), cos, sin, B, T, H, Hkv, D, pos0, -1.0f);
  store_bf16(dqkv16, x);
}
void rope_tables(const ExecContext&, float* cos, float* sin, int64_t max_pos, int64_t D, float theta) {
  ref_impl::rope_tables(cos, sin, max_pos, D, theta);
}
void attention_forward(const ExecContext&, float* out, float* lse, const float* qkv, int64_t B, int64_t T, int64_t H,
                       int64_t Hkv, int64_t D) {
  ref_impl::attention_forward(out, lse, qkv, B, T, H, Hkv, D);
}
void attention_backward(const ExecContext&, float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D) {
  ref_impl::attention_backward(dqkv, dout, qkv, out, lse, B, T, H, Hkv, D);
}
void attention_forward_bf16(const ExecContext&, uint16_t* out, float* lse, const uint16_t* qkv, int64_t B, int64_t T,
                            int64_t H, int64_t Hkv, int64_t D) {
  const std::vector<float> x = widen_bf16(qkv, qkv_elems(B, T, H, Hkv, D));
  std::vector<float> o(static_cast<size_t>(B * T * H * D));
  ref_impl::attention_forward(o.data(), lse, x.data(), B, T, H, Hkv, D);
  store_bf16(out, o);
}
void attention_backward_bf16(const ExecContext&, uint16_t* dqkv, const uint16_t* dout, const uint16_t* qkv,
                             const uint16_t* out, const float* lse, int64_t B, int64_t T, int64_t H, int64_t Hkv,
                             int64_t D) {
  const int64_t n_qkv = qkv_elems(B, T, H, Hkv, D), n_out = B * T * H * D;
  const std::vector<float> x = widen_bf16(qkv, n_qkv), o = widen_bf16(out, n_out), d = widen_bf16(dout, n_out);
  std::vector<float> dx(static_cast<size_t>(n_qkv));
  ref_impl::attention_backward(dx.data(), d.data(), x.data(), o.data(), lse, B, T, H, Hkv, D);
  store_bf16(dqkv, dx);
}
void kv_cache_write(const ExecContext&, float* k_cache, float* v_cache, const float* qkv, int64_t B, int64_t T,
                    int64_t H, int64_t Hkv, int64_t D, int64_t pos0, int64_t max_T) {
  check_decode_sizes("kv_cache_write", B, pos0, T, H, Hkv, D, max_T);
  ref_impl::kv_cache_write(k_cache, v_cache, qkv, B, T, H, Hkv, D, pos0, max_T);
}
void attention_decode(const ExecContext&, float* out, const float* qkv, const float* k_cache, const float* v_cache,
                      int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv, int64_t D, int64_t max_T) {
  check_decode_sizes("attention_decode", B, Tk - Tq, Tq, H, Hkv, D, max_T);
  ref_impl::attention_decode(out, qkv, k_cache, v_cache, B, Tq, Tk, H, Hkv, D, max_T);
}
void swiglu_forward(const ExecContext&, float* out, const float* gate_up, int64_t N, int64_t F) {
  ref_impl::swiglu_forward(out, gate_up, N, F);
}
void swiglu_backward(const ExecContext&, float* dgate_up, const float* dout, const float* gate_up, int64_t N,
                     int64_t F) {
  ref_impl::swiglu_backward(dgate_up, dout, gate_up, N, F);
}
void swiglu_forward_bf16(const ExecContext&, uint16_t* out, const uint16_t* gate_up, int64_t N, int64_t F) {
  std::vector<float> y(static_cast<size_t>(N * F));
  ref_impl::swiglu_forward(y.data(), widen_bf16(gate_up, N * 2 * F).data(), N, F);
  store_bf16(out, y);
}
void swiglu_backward_bf16(const ExecContext&, uint16_t* dgate_up, const uint16_t* dout, const uint16_t* gate_up,
                          int64_t N, int64_t F) {
  std::vector<float> d(static_cast<size_t>(N * 2 * F));
  ref_impl::swiglu_backward(d.data(), widen_bf16(dout, N * F).data(), widen_bf16(gate_up, N * 2 * F).data(), N, F);
  store_bf16(dgate_up, d);
}
void xent_forward(const ExecContext&, float* loss, float* lse, const float* logits, const int32_t* targets, int64_t N,
                  int64_t V) {
  ref_impl::xent_forward(loss, lse, logits, targets, N, V);
}
void xent_backward(const ExecContext&, float* dlogits, const float* logits, const float* lse, const int32_t* targets,
                   int64_t N, int64_t V, float scale) {
  ref_impl::xent_backward(dlogits, logits, lse, targets, N, V, scale);
}
void xent_backward_bf16(const ExecContext&, uint16_t* dlogits, const float* logits, const float* lse,
                        const int32_t* targets, int64_t N, int64_t V, float scale) {
  std::vector<float> d(static_cast<size_t>(N * V));
  ref_impl::xent_backward(d.data(), logits, lse, targets, N, V, scale);
  store_bf16(dlogits, d);
}

void xent_shard_targets(const ExecContext&, int32_t* local, const int32_t* targets, int64_t N, int64_t v0, int64_t V) {
  for (int64_t n = 0; n < N; ++n) {
    const int64_t t = targets[n];
    local[n] = t < 0 ? -1 : static_cast<int32_t>(t < v0 ? V : t - v0);
  }
}
void xent_target_logit(const ExecContext&, float* target_logit, const float* logits, const int32_t* targets, int64_t N,
                       int64_t V) {
  for (int64_t n = 0; n < N; ++n) {
    const int64_t t = targets[n];
    target_logit[n] = t >= 0 && t < V ? logits[n * V + t] : 0.0f;
  }
}
void xent_combine_max(const ExecContext&, double* row_max, const float* lse, int64_t N) {
  for (int64_t n = 0; n < N; ++n) row_max[n] = lse[n];
}
void xent_combine_sums(const ExecContext&, double* sums, const float* lse, const float* target_logit,
                       const double* row_max, int64_t N) {
  for (int64_t n = 0; n < N; ++n) {
    sums[n] = std::exp(static_cast<double>(lse[n]) - row_max[n]);
    sums[N + n] = target_logit[n];
  }
}
void xent_combine_finish(const ExecContext&, float* lse, float* target_logit, const double* row_max, const double* sums,
                         int64_t N) {
  for (int64_t n = 0; n < N; ++n) {
    lse[n] = static_cast<float>(row_max[n] + std::log(sums[n]));
    target_logit[n] = static_cast<float>(sums[N + n]);
  }
}
void xent_loss_from_rows(const ExecContext&, float* loss, const float* lse, const float* target_logit,
                         const int32_t* targets, int64_t N) {
  for (int64_t n = 0; n < N; ++n) loss[n] = targets[n] < 0 ? 0.0f : lse[n] - target_logit[n];
}

void add_inplace(const ExecContext&, float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}
void sum_squares(const ExecContext&, double* sum, const float* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  *sum += s;
}
void sum_in_order(const ExecContext&, double* sum, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) *sum += static_cast<double>(x[i]);
}
void to_bf16(const ExecContext&, uint16_t* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f32_to_bf16(x[i]);
}

void from_bf16(const ExecContext&, float* y, const uint16_t* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_f32(x[i]);
}

void to_fp16(const ExecContext&, uint16_t* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f32_to_f16(x[i]);
}

void from_fp16(const ExecContext&, float* y, const uint16_t* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f16_to_f32(x[i]);
}

// The bias corrections come computed (AdamwStepScalars, in double on the host): the reference
// checks the update's arithmetic; adamw_step_scalars is tested against its formula on its own.
void adamw_step(const ExecContext&, float* param, float* m, float* v, uint16_t* param_bf16, const float* grad,
                int64_t n, const AdamwStepScalars* step, float beta1, float beta2, float eps, float weight_decay) {
  const float lr = step->lr, step_size = step->step_size, bc2_sqrt = step->bc2_sqrt, grad_scale = step->grad_scale;
  for (int64_t i = 0; i < n; ++i) {
    float g = grad[i] * grad_scale;
    m[i] = beta1 * m[i] + (1.0f - beta1) * g;
    v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
    param[i] *= 1.0f - lr * weight_decay;
    float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
    param[i] -= step_size * m[i] / denom;
    if (param_bf16) param_bf16[i] = f32_to_bf16(param[i]);
  }
}

void gram_schmidt(const ExecContext&, float* P, int64_t n, int64_t r) {
  for (int64_t j = 0; j < r; ++j) {
    for (int64_t k = 0; k < j; ++k) {  // remove the earlier columns' components
      double dot = 0;
      for (int64_t i = 0; i < n; ++i) dot += static_cast<double>(P[i * r + j]) * P[i * r + k];
      for (int64_t i = 0; i < n; ++i) P[i * r + j] -= static_cast<float>(dot) * P[i * r + k];
    }
    double norm = 0;
    for (int64_t i = 0; i < n; ++i) norm += static_cast<double>(P[i * r + j]) * P[i * r + j];
    const float inv = static_cast<float>(1.0 / (std::sqrt(norm) + 1e-8));
    for (int64_t i = 0; i < n; ++i) P[i * r + j] *= inv;
  }
}
void powersgd_error_feedback(const ExecContext&, float* error, float* grad, const float* approx, float ranks,
                             int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    error[i] = grad[i] - approx[i] / ranks;
    grad[i] = approx[i];
  }
}

const OpTable& op_table() {
  static const OpTable table = [] {
    OpTable t;
    t.backend = "ref";
#define FT_OP(name, params, args) t.name = &name;
#include "kernels/op_decls.inc"
#undef FT_OP
    return t;
  }();
  return table;
}

}  // namespace ft::ref

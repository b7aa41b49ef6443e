// TEMPORARY (development only): CPU ops not yet written forward to the reference.
// Each fast kernel that lands deletes its forwarder here; this file goes when it is empty.
#include "kernels/ops.h"

namespace ft::cpu {

void matmul(float* C, const float* A, const float* B, int64_t M, int64_t N, int64_t K, bool ta,
            bool tb, float beta, Precision p) {
  ref::matmul(C, A, B, M, N, K, ta, tb, beta, p);
}
void embedding_forward(float* out, const int32_t* tokens, const float* table, int64_t N, int64_t C,
                       int64_t v0, int64_t V) {
  ref::embedding_forward(out, tokens, table, N, C, v0, V);
}
void embedding_backward(float* dtable, const float* dout, const int32_t* tokens, int64_t N, int64_t C,
                        int64_t v0, int64_t V) {
  ref::embedding_backward(dtable, dout, tokens, N, C, v0, V);
}
void rmsnorm_forward(float* out, float* rstd, const float* x, const float* w, int64_t N, int64_t C,
                     float eps) {
  ref::rmsnorm_forward(out, rstd, x, w, N, C, eps);
}
void rmsnorm_backward(float* dx, float* dw, const float* dout, const float* x, const float* w,
                      const float* rstd, int64_t N, int64_t C) {
  ref::rmsnorm_backward(dx, dw, dout, x, w, rstd, N, C);
}
void rope_forward(float* qkv, const float* cos, const float* sin, int64_t B, int64_t T, int64_t H,
                  int64_t Hkv, int64_t D, int64_t pos0) {
  ref::rope_forward(qkv, cos, sin, B, T, H, Hkv, D, pos0);
}
void rope_backward(float* dqkv, const float* cos, const float* sin, int64_t B, int64_t T, int64_t H,
                   int64_t Hkv, int64_t D, int64_t pos0) {
  ref::rope_backward(dqkv, cos, sin, B, T, H, Hkv, D, pos0);
}
void rope_tables(float* cos, float* sin, int64_t max_pos, int64_t D, float theta) {
  ref::rope_tables(cos, sin, max_pos, D, theta);
}
void swiglu_forward(float* out, const float* gu, int64_t N, int64_t F) { ref::swiglu_forward(out, gu, N, F); }
void swiglu_backward(float* dgu, const float* dout, const float* gu, int64_t N, int64_t F) {
  ref::swiglu_backward(dgu, dout, gu, N, F);
}
void xent_forward(float* loss, float* lse, const float* logits, const int32_t* t, int64_t N, int64_t V) {
  ref::xent_forward(loss, lse, logits, t, N, V);
}
void xent_backward(float* dl, const float* logits, const float* lse, const int32_t* t, int64_t N,
                   int64_t V, float scale) {
  ref::xent_backward(dl, logits, lse, t, N, V, scale);
}
void add_inplace(float* y, const float* x, int64_t n) { ref::add_inplace(y, x, n); }
void scale_inplace(float* y, float a, int64_t n) { ref::scale_inplace(y, a, n); }
double sum_squares(const float* x, int64_t n) { return ref::sum_squares(x, n); }
void adamw_step(float* p, float* m, float* v, uint16_t* pb, const float* g, int64_t n, float lr,
                float b1, float b2, float eps, float wd, int64_t step, float gs) {
  ref::adamw_step(p, m, v, pb, g, n, lr, b1, b2, eps, wd, step, gs);
}

}  // namespace ft::cpu

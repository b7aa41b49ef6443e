// Scalar reference kernels, templated on the element type: float for ft::ref (the oracle the
// fast kernels are tested against) and double for the finite-difference gradient checks.
// Written to be obviously right, not fast. Layouts and conventions: kernels/ops.h.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace ft::ref_impl {

// C(M, N) = op(A) · op(B) + beta · C
template <typename T>
void matmul(T* C, const T* A, const T* B, int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b, T beta) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        T a = trans_a ? A[k * M + i] : A[i * K + k];
        T b = trans_b ? B[j * K + k] : B[k * N + j];
        acc += static_cast<double>(a) * static_cast<double>(b);
      }
      C[i * N + j] = static_cast<T>(acc) + (beta != T(0) ? beta * C[i * N + j] : T(0));
    }
  }
}

template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* table, int64_t N, int64_t C, int64_t v0, int64_t V) {
  for (int64_t n = 0; n < N; ++n) {
    int64_t row = static_cast<int64_t>(tokens[n]) - v0;
    for (int64_t c = 0; c < C; ++c) out[n * C + c] = (row >= 0 && row < V) ? table[row * C + c] : T(0);
  }
}

template <typename T>
void embedding_backward(T* dtable, const T* dout, const int32_t* tokens, int64_t N, int64_t C, int64_t v0, int64_t V) {
  for (int64_t n = 0; n < N; ++n) {
    int64_t row = static_cast<int64_t>(tokens[n]) - v0;
    if (row < 0 || row >= V) continue;
    for (int64_t c = 0; c < C; ++c) dtable[row * C + c] += dout[n * C + c];
  }
}

template <typename T>
void rmsnorm_forward(T* out, T* rstd, const T* x, const T* w, int64_t N, int64_t C, T eps) {
  for (int64_t n = 0; n < N; ++n) {
    const T* xr = x + n * C;
    double ss = 0;
    for (int64_t c = 0; c < C; ++c) ss += static_cast<double>(xr[c]) * xr[c];
    T r = static_cast<T>(1.0 / std::sqrt(ss / static_cast<double>(C) + static_cast<double>(eps)));
    rstd[n] = r;
    for (int64_t c = 0; c < C; ++c) out[n * C + c] = xr[c] * r * w[c];
  }
}

// y = x r w with r = (mean(x^2) + eps)^-1/2:
//   dx_c = r (dy_c w_c) - x_c r^3 / C · sum_k dy_k w_k x_k ;  dw_c += dy_c x_c r
template <typename T>
void rmsnorm_backward(T* dx, T* dw, const T* dout, const T* x, const T* w, const T* rstd, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; ++n) {
    const T* xr = x + n * C;
    const T* dy = dout + n * C;
    double r = rstd[n];
    double dot = 0;
    for (int64_t c = 0; c < C; ++c) dot += static_cast<double>(dy[c]) * w[c] * xr[c];
    for (int64_t c = 0; c < C; ++c) {
      dx[n * C + c] = static_cast<T>(r * dy[c] * w[c] - xr[c] * r * r * r * dot / static_cast<double>(C));
      dw[c] += static_cast<T>(dy[c] * xr[c] * r);
    }
  }
}

template <typename T>
void rope_tables(T* cos, T* sin, int64_t max_pos, int64_t D, T theta) {
  int64_t half = D / 2;
  for (int64_t p = 0; p < max_pos; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      double inv_freq = std::pow(static_cast<double>(theta), -2.0 * static_cast<double>(i) / static_cast<double>(D));
      double angle = static_cast<double>(p) * inv_freq;
      cos[p * half + i] = static_cast<T>(std::cos(angle));
      sin[p * half + i] = static_cast<T>(std::sin(angle));
    }
  }
}

// Rotate-half: (a, b) = (x_i, x_{i+D/2}) → (a cos − b sin, b cos + a sin); sign = −1 inverts.
template <typename T>
void rope_apply(T* qkv, const T* cos, const T* sin, int64_t B, int64_t T_, int64_t H, int64_t Hkv, int64_t D,
                int64_t pos0, T sign) {
  int64_t half = D / 2;
  int64_t row = (H + 2 * Hkv) * D;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T_; ++t) {
      T* tok = qkv + (b * T_ + t) * row;
      const T* c = cos + (pos0 + t) * half;
      const T* s = sin + (pos0 + t) * half;
      for (int64_t h = 0; h < H + Hkv; ++h) {  // query heads, then key heads
        T* x = tok + h * D;
        for (int64_t i = 0; i < half; ++i) {
          T a = x[i], bb = x[i + half];
          x[i] = a * c[i] - sign * bb * s[i];
          x[i + half] = bb * c[i] + sign * a * s[i];
        }
      }
    }
  }
}

// Naive causal attention: the full (T, T) score matrix per head, in double.
template <typename T>
void attention_forward(T* out, T* lse, const T* qkv, int64_t B, int64_t T_, int64_t H, int64_t Hkv, int64_t D) {
  int64_t row = (H + 2 * Hkv) * D;
  int64_t group = H / Hkv;
  double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<double> p(static_cast<size_t>(T_));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      int64_t kh = h / group;
      for (int64_t i = 0; i < T_; ++i) {
        const T* q = qkv + (b * T_ + i) * row + h * D;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j <= i; ++j) {
          const T* k = qkv + (b * T_ + j) * row + (H + kh) * D;
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += static_cast<double>(q[d]) * k[d];
          p[j] = s * scale;
          mx = std::max(mx, p[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j <= i; ++j) sum += std::exp(p[j] - mx);
        double l = mx + std::log(sum);
        lse[(b * H + h) * T_ + i] = static_cast<T>(l);
        T* o = out + (b * T_ + i) * H * D + h * D;
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t j = 0; j <= i; ++j) {
            const T* v = qkv + (b * T_ + j) * row + (H + Hkv + kh) * D;
            acc += std::exp(p[j] - l) * v[d];
          }
          o[d] = static_cast<T>(acc);
        }
      }
    }
  }
}

// With P = softmax(S), S = q kᵀ · scale:  dV = Pᵀ dO;  dP = dO Vᵀ;  dS = P ∘ (dP − rowsum(dO ∘ O));
//   dQ = dS K · scale;  dK = dSᵀ Q · scale. Key/value gradients sum over the heads of a group.
template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const T* lse, int64_t B, int64_t T_,
                        int64_t H, int64_t Hkv, int64_t D) {
  int64_t row = (H + 2 * Hkv) * D;
  int64_t group = H / Hkv;
  double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<double> acc(static_cast<size_t>(B * T_ * row), 0.0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      int64_t kh = h / group;
      for (int64_t i = 0; i < T_; ++i) {
        const T* q = qkv + (b * T_ + i) * row + h * D;
        const T* o = out + (b * T_ + i) * H * D + h * D;
        const T* dO = dout + (b * T_ + i) * H * D + h * D;
        double l = lse[(b * H + h) * T_ + i];
        double delta = 0;
        for (int64_t d = 0; d < D; ++d) delta += static_cast<double>(dO[d]) * o[d];
        for (int64_t j = 0; j <= i; ++j) {
          const T* k = qkv + (b * T_ + j) * row + (H + kh) * D;
          const T* v = qkv + (b * T_ + j) * row + (H + Hkv + kh) * D;
          double s = 0, dp = 0;
          for (int64_t d = 0; d < D; ++d) {
            s += static_cast<double>(q[d]) * k[d];
            dp += static_cast<double>(dO[d]) * v[d];
          }
          double pij = std::exp(s * scale - l);
          double ds = pij * (dp - delta);
          double* dq = &acc[static_cast<size_t>((b * T_ + i) * row + h * D)];
          double* dk = &acc[static_cast<size_t>((b * T_ + j) * row + (H + kh) * D)];
          double* dv = &acc[static_cast<size_t>((b * T_ + j) * row + (H + Hkv + kh) * D)];
          for (int64_t d = 0; d < D; ++d) {
            dq[d] += ds * k[d] * scale;
            dk[d] += ds * q[d] * scale;
            dv[d] += pij * dO[d];
          }
        }
      }
    }
  }
  for (size_t i = 0; i < acc.size(); ++i) dqkv[i] = static_cast<T>(acc[i]);
}

// Copies key and value heads of qkv to cache positions pos0.. (cache layout: ops.h).
template <typename T>
void kv_cache_write(T* k_cache, T* v_cache, const T* qkv, int64_t B, int64_t T_, int64_t H, int64_t Hkv, int64_t D,
                    int64_t pos0, int64_t max_T) {
  int64_t row = (H + 2 * Hkv) * D;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T_; ++t)
      for (int64_t kh = 0; kh < Hkv; ++kh)
        for (int64_t d = 0; d < D; ++d) {
          int64_t dst = ((b * Hkv + kh) * max_T + pos0 + t) * D + d;
          k_cache[dst] = qkv[(b * T_ + t) * row + (H + kh) * D + d];
          v_cache[dst] = qkv[(b * T_ + t) * row + (H + Hkv + kh) * D + d];
        }
}

// Queries at positions Tk-Tq..Tk-1 against the cached keys 0..Tk-1, causally, in double.
template <typename T>
void attention_decode(T* out, const T* qkv, const T* k_cache, const T* v_cache, int64_t B, int64_t Tq, int64_t Tk,
                      int64_t H, int64_t Hkv, int64_t D, int64_t max_T) {
  int64_t row = (H + 2 * Hkv) * D;
  int64_t group = H / Hkv;
  double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<double> p(static_cast<size_t>(Tk));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      int64_t kh = h / group;
      const T* kc = k_cache + (b * Hkv + kh) * max_T * D;
      const T* vc = v_cache + (b * Hkv + kh) * max_T * D;
      for (int64_t t = 0; t < Tq; ++t) {
        int64_t last = Tk - Tq + t;
        const T* q = qkv + (b * Tq + t) * row + h * D;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j <= last; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += static_cast<double>(q[d]) * kc[j * D + d];
          p[j] = s * scale;
          mx = std::max(mx, p[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j <= last; ++j) sum += (p[j] = std::exp(p[j] - mx));
        T* o = out + (b * Tq + t) * H * D + h * D;
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t j = 0; j <= last; ++j) acc += p[j] * vc[j * D + d];
          o[d] = static_cast<T>(acc / sum);
        }
      }
    }
  }
}

template <typename T>
T silu(T x) {
  return x / (T(1) + std::exp(-x));
}

template <typename T>
void swiglu_forward(T* out, const T* gu, int64_t N, int64_t F) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t f = 0; f < F; ++f) out[n * F + f] = silu(gu[n * 2 * F + f]) * gu[n * 2 * F + F + f];
}

// silu'(g) = s (1 + g (1 − s)), s = sigmoid(g)
template <typename T>
void swiglu_backward(T* dgu, const T* dout, const T* gu, int64_t N, int64_t F) {
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t f = 0; f < F; ++f) {
      T g = gu[n * 2 * F + f], u = gu[n * 2 * F + F + f], dy = dout[n * F + f];
      T s = T(1) / (T(1) + std::exp(-g));
      dgu[n * 2 * F + f] = dy * u * s * (T(1) + g * (T(1) - s));
      dgu[n * 2 * F + F + f] = dy * g * s;
    }
  }
}

template <typename T>
void xent_forward(T* loss, T* lse, const T* logits, const int32_t* targets, int64_t N, int64_t V) {
  for (int64_t n = 0; n < N; ++n) {
    const T* z = logits + n * V;
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < V; ++j) mx = std::max(mx, static_cast<double>(z[j]));
    double sum = 0;
    for (int64_t j = 0; j < V; ++j) sum += std::exp(static_cast<double>(z[j]) - mx);
    double l = mx + std::log(sum);
    lse[n] = static_cast<T>(l);
    int32_t t = targets[n];
    loss[n] = (t >= 0 && t < V) ? static_cast<T>(l - static_cast<double>(z[t])) : T(0);
  }
}

template <typename T>
void xent_backward(T* dlogits, const T* logits, const T* lse, const int32_t* targets, int64_t N, int64_t V, T scale) {
  for (int64_t n = 0; n < N; ++n) {
    int32_t t = targets[n];
    for (int64_t j = 0; j < V; ++j) {
      T g = T(0);
      if (t >= 0) {
        g = static_cast<T>(std::exp(static_cast<double>(logits[n * V + j]) - lse[n]));
        if (j == t) g -= T(1);
        g *= scale;
      }
      dlogits[n * V + j] = g;
    }
  }
}

}  // namespace ft::ref_impl

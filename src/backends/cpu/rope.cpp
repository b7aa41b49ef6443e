// Rotary position embedding, "rotate half" (Hugging Face LLaMA): in each query and key head the
// dims (i, i + D/2) form a pair rotated by the angle of (position, i). Backward is the inverse
// rotation. Parallel over tokens; per token, the cos/sin row is loaded once for all its heads.
#include <cmath>

#include "backends/cpu/simd.h"
#include "kernels/ops.h"

namespace ft::cpu {

using namespace simd;

namespace {
// qkv (B, T, (H + 2 Hkv) D): rotate the first H + Hkv heads of every token by sign · angle.
void rope_rotate(float* qkv, const float* cos, const float* sin, int64_t B, int64_t T, int64_t H, int64_t Hkv,
                 int64_t D, int64_t pos0, float sign) {
  int64_t half = D / 2;
  int64_t row = (H + 2 * Hkv) * D;
#pragma omp parallel for schedule(static) if (B * T * row > 16384)
  for (int64_t bt = 0; bt < B * T; ++bt) {
    int64_t t = bt % T;
    const float* c = cos + (pos0 + t) * half;  // (half)
    const float* s = sin + (pos0 + t) * half;  // (half)
    float* tok = qkv + bt * row;
    for (int64_t h = 0; h < H + Hkv; ++h) {  // query heads, then key heads
      float* x = tok + h * D;
      for (int64_t i = 0; i < half; i += kLanes) {
        int w = width(half - i);
        F32x16 cv = load(c + i, w), sv = load(s + i, w) * set1(sign);
        F32x16 a = load(x + i, w), b = load(x + half + i, w);
        store(x + i, fnmadd(b, sv, a * cv), w);        // a cos − b sin
        store(x + half + i, fmadd(a, sv, b * cv), w);  // b cos + a sin
      }
    }
  }
}
}  // namespace

void rope_forward(const ExecContext&, float* qkv, const float* cos, const float* sin, int64_t B, int64_t T, int64_t H,
                  int64_t Hkv, int64_t D, int64_t pos0) {
  rope_rotate(qkv, cos, sin, B, T, H, Hkv, D, pos0, 1.0f);
}

void rope_backward(const ExecContext&, float* dqkv, const float* cos, const float* sin, int64_t B, int64_t T, int64_t H,
                   int64_t Hkv, int64_t D, int64_t pos0) {
  rope_rotate(dqkv, cos, sin, B, T, H, Hkv, D, pos0, -1.0f);
}

// cos, sin (max_pos, D/2): angle(p, i) = p · theta^(−2i/D), computed in double (once per run).
void rope_tables(const ExecContext&, float* cos, float* sin, int64_t max_pos, int64_t D, float theta) {
  int64_t half = D / 2;
#pragma omp parallel for schedule(static) if (max_pos * half > 16384)
  for (int64_t p = 0; p < max_pos; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      double inv_freq = std::pow(static_cast<double>(theta), -2.0 * static_cast<double>(i) / static_cast<double>(D));
      double angle = static_cast<double>(p) * inv_freq;
      cos[p * half + i] = static_cast<float>(std::cos(angle));
      sin[p * half + i] = static_cast<float>(std::sin(angle));
    }
  }
}

}  // namespace ft::cpu

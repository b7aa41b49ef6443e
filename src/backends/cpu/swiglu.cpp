// SwiGLU: out = silu(gate) ∘ up, with gate and up the two halves of each gate_up row.
// One pass over memory, parallel over rows.
#include "backends/cpu/simd.h"
#include "kernels/ops.h"

namespace ft::cpu {

using namespace simd;

namespace {

// out(N, F) from gate_up(N, 2F), both fp32 or both bf16 (widened, computed in fp32, rounded):
// silu(g) u = g / (1 + e^−g) · u.
template <typename T>
void forward(T* out, const T* gate_up, int64_t N, int64_t F) {
  const F32x16 one = set1(1.0f);
#pragma omp parallel for schedule(static) if (N * F > 8192)
  for (int64_t n = 0; n < N; ++n) {
    const T* g = gate_up + n * 2 * F;
    const T* u = g + F;
    T* o = out + n * F;
    for (int64_t f = 0; f < F; f += kLanes) {
      int w = width(F - f);
      F32x16 gv = load_any(g + f, w);
      store(o + f, gv / (one + exp(zero() - gv)) * load_any(u + f, w), w);
    }
  }
}

// dgate_up(N, 2F) from dout(N, F) (all fp32 or all bf16):  with s = sigmoid(g),
//   dgate = dy · u · s (1 + g (1 − s)),   dup = dy · g · s.
template <typename T>
void backward(T* dgate_up, const T* dout, const T* gate_up, int64_t N, int64_t F) {
  const F32x16 one = set1(1.0f);
#pragma omp parallel for schedule(static) if (N * F > 8192)
  for (int64_t n = 0; n < N; ++n) {
    const T* g = gate_up + n * 2 * F;
    const T* u = g + F;
    const T* dy = dout + n * F;
    T* dg = dgate_up + n * 2 * F;
    T* du = dg + F;
    for (int64_t f = 0; f < F; f += kLanes) {
      int w = width(F - f);
      F32x16 gv = load_any(g + f, w), uv = load_any(u + f, w), dyv = load_any(dy + f, w);
      F32x16 s = one / (one + exp(zero() - gv));
      store(dg + f, dyv * uv * s * fmadd(gv, one - s, one), w);
      store(du + f, dyv * gv * s, w);
    }
  }
}

}  // namespace

void swiglu_forward(const ExecContext&, float* out, const float* gate_up, int64_t N, int64_t F) {
  forward(out, gate_up, N, F);
}
void swiglu_forward_bf16(const ExecContext&, uint16_t* out, const uint16_t* gate_up, int64_t N, int64_t F) {
  forward(out, gate_up, N, F);
}
void swiglu_backward(const ExecContext&, float* dgate_up, const float* dout, const float* gate_up, int64_t N,
                     int64_t F) {
  backward(dgate_up, dout, gate_up, N, F);
}
void swiglu_backward_bf16(const ExecContext&, uint16_t* dgate_up, const uint16_t* dout, const uint16_t* gate_up,
                          int64_t N, int64_t F) {
  backward(dgate_up, dout, gate_up, N, F);
}

}  // namespace ft::cpu

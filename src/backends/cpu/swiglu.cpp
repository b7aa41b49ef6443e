// SwiGLU: out = silu(gate) ∘ up, with gate and up the two halves of each gate_up row.
// One pass over memory, parallel over rows.
#include "backends/cpu/simd.h"
#include "kernels/ops.h"

namespace ft::cpu {

using namespace simd;

namespace {

// out(N, F) (fp32 or bf16) from gate_up(N, 2F): silu(g) u = g / (1 + e^−g) · u.
template <typename Out>
void forward(Out* out, const float* gate_up, int64_t N, int64_t F) {
  const F32x16 one = set1(1.0f);
#pragma omp parallel for schedule(static) if (N * F > 8192)
  for (int64_t n = 0; n < N; ++n) {
    const float* g = gate_up + n * 2 * F;
    const float* u = g + F;
    Out* o = out + n * F;
    for (int64_t f = 0; f < F; f += kLanes) {
      int w = width(F - f);
      F32x16 gv = load(g + f, w);
      store(o + f, gv / (one + exp(zero() - gv)) * load(u + f, w), w);
    }
  }
}

// dgate_up(N, 2F) (fp32 or bf16) from dout(N, F):  with s = sigmoid(g),
//   dgate = dy · u · s (1 + g (1 − s)),   dup = dy · g · s.
template <typename Out>
void backward(Out* dgate_up, const float* dout, const float* gate_up, int64_t N, int64_t F) {
  const F32x16 one = set1(1.0f);
#pragma omp parallel for schedule(static) if (N * F > 8192)
  for (int64_t n = 0; n < N; ++n) {
    const float* g = gate_up + n * 2 * F;
    const float* u = g + F;
    const float* dy = dout + n * F;
    Out* dg = dgate_up + n * 2 * F;
    Out* du = dg + F;
    for (int64_t f = 0; f < F; f += kLanes) {
      int w = width(F - f);
      F32x16 gv = load(g + f, w), uv = load(u + f, w), dyv = load(dy + f, w);
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
void swiglu_forward_bf16(const ExecContext&, uint16_t* out, const float* gate_up, int64_t N, int64_t F) {
  forward(out, gate_up, N, F);
}
void swiglu_backward(const ExecContext&, float* dgate_up, const float* dout, const float* gate_up, int64_t N,
                     int64_t F) {
  backward(dgate_up, dout, gate_up, N, F);
}
void swiglu_backward_bf16(const ExecContext&, uint16_t* dgate_up, const float* dout, const float* gate_up, int64_t N,
                          int64_t F) {
  backward(dgate_up, dout, gate_up, N, F);
}

}  // namespace ft::cpu

// kernels/ops.h — every compute op of the model, declared once.
//
// The same declarations are compiled three times (see op_decls.inc):
//   ft::ref::  scalar reference implementations, written for clarity, never optimised
//              (kernels/ref/); their templates also run in float64 for gradient checks;
//   ft::cpu::  the fast CPU implementations (kernels/cpu/): AVX-512, OpenMP, oneDNN;
//   ft::ops::  what model code calls — today the CPU ops; a CUDA build dispatches here.
// A backend that forgets an op fails to link the op harness (tests/unit/kernels_*_test.cpp).
//
// Conventions (as in every op below):
//   - arguments: outputs first, then inputs, then saved activations, then sizes;
//   - row-major, contiguous; shapes are written beside each pointer;
//   - backward ops write (=) activation gradients and accumulate (+=) parameter gradients;
//   - tokens and targets are int32; a target < 0 is ignored (no loss, no gradient).
//
// Model tensor layouts the ops rely on:
//   qkv     (B, T, (H + 2*Hkv) * D): per token the H query heads, then Hkv key heads, then
//           Hkv value heads — the output of one GEMM against [Wq; Wk; Wv] (HF names q_proj,
//           k_proj, v_proj stacked along the output dimension).
//   gate_up (N, 2*F): per token F gate values, then F up values — one GEMM against [W1; W3]
//           (HF gate_proj, up_proj).
//   RoPE uses the "rotate half" convention of Hugging Face LLaMA: dims (i, i + D/2) form a pair.
#pragma once

#include <cstdint>

namespace ft {

enum class Precision : uint8_t {
  kF32 = 0,   // fp32 everywhere
  kBF16 = 1,  // GEMM inputs rounded to bf16 (AMX / AVX512-BF16), fp32 accumulation and output
  kF16 = 2,   // GEMM inputs rounded to fp16, fp32 accumulation and output (loss scaling needed)
};

// "fp32", "bf16", "fp16": the spelling of train.precision.
constexpr const char* precision_label(Precision p) {
  return p == Precision::kBF16 ? "bf16" : p == Precision::kF16 ? "fp16" : "fp32";
}

namespace ref {
#include "kernels/op_decls.inc"
}  // namespace ref

namespace cpu {
#include "kernels/op_decls.inc"
}  // namespace cpu

// What the model calls. A using-directive keeps one spelling (ops::rmsnorm_forward) while the
// CPU backend is the only one that runs here.
namespace ops {
using namespace ::ft::cpu;
}  // namespace ops

}  // namespace ft

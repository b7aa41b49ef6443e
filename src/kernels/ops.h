// kernels/ops.h — every compute op of the model, declared once (kernels/op_decls.inc) and
// expanded here into:
//   OpId, kOpCount, op_name()  one id per op (the op harness has one row per id);
//   ft::ref::  scalar reference implementations, written for clarity, never optimised
//              (kernels/ref/); their templates also run in float64 for gradient checks;
//   ft::cpu::  the fast CPU implementations (backends/cpu/): AVX-512, OpenMP, oneDNN;
//   OpTable    a backend's ops as function pointers, one member per op, filled by the backend
//              from the same list (ref::op_table(), cpu::op_table()): a missing op fails to link;
//   ft::ops::  what model code calls: ops::name(ctx, ...) runs on ctx.device through the
//              OpTable of its Backend (tensor/backend.h; the CPU's always is).
// Every op takes the ExecContext it runs on first (tensor/exec_context.h); a device with no
// backend is an ft::Error naming the device and the op.
//
// Conventions (as in every op of the list):
//   - arguments: the context, then outputs, then inputs, then saved activations, then sizes;
//   - row-major, contiguous; shapes are written beside each pointer;
//   - backward ops write (=) activation gradients and accumulate (+=) parameter gradients;
//   - tokens and targets are int32; a target < 0 is ignored (no loss, no gradient);
//   - ops return nothing: every result, reductions included, is written to memory.
//
// Model tensor layouts the ops rely on:
//   qkv     (B, T, (H + 2*Hkv) * D): per token the H query heads, then Hkv key heads, then
//           Hkv value heads — the output of one GEMM against [Wq; Wk; Wv] (HF names q_proj,
//           k_proj, v_proj stacked along the output dimension).
//   gate_up (N, 2*F): per token F gate values, then F up values — one GEMM against [W1; W3]
//           (HF gate_proj, up_proj).
//   RoPE uses the "rotate half" convention of Hugging Face LLaMA: dims (i, i + D/2) form a pair.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "kernels/adamw_scalars.h"  // AdamwStepScalars: adamw_step's per-step values
#include "tensor/exec_context.h"
#include "tensor/op_tables.h"
#include "tensor/precision.h"

namespace ft {

// Removes the parentheses around an entry's parameter or argument list.
#define FT_OP_UNPAREN(...) __VA_ARGS__

// One id per op, in the order of the list.
enum class OpId : uint16_t {
#define FT_OP(name, params, args) name,
#include "kernels/op_decls.inc"
#undef FT_OP
};

inline constexpr size_t kOpCount = 0
#define FT_OP(name, params, args) +1
#include "kernels/op_decls.inc"
#undef FT_OP
    ;

inline constexpr const char* kOpNames[] = {
#define FT_OP(name, params, args) #name,
#include "kernels/op_decls.inc"
#undef FT_OP
};
static_assert(sizeof(kOpNames) / sizeof(kOpNames[0]) == kOpCount);

// "matmul", "rmsnorm_forward_bf16", ...
constexpr const char* op_name(OpId id) {
  return kOpNames[static_cast<size_t>(id)];
}

// A backend's ops: one function pointer per op of the list.
struct OpTable {
  const char* backend = "";  // "ref", "cpu", ...
#define FT_OP(name, params, args) void (*name)(const ExecContext& ctx, FT_OP_UNPAREN params) = nullptr;
#include "kernels/op_decls.inc"
#undef FT_OP
};

namespace ref {
#define FT_OP(name, params, args) void name(const ExecContext& ctx, FT_OP_UNPAREN params);
#include "kernels/op_decls.inc"
#undef FT_OP
// Every op above (kernels/ref/ref_ops.cpp).
const OpTable& op_table();
}  // namespace ref

namespace cpu {
#define FT_OP(name, params, args) void name(const ExecContext& ctx, FT_OP_UNPAREN params);
#include "kernels/op_decls.inc"
#undef FT_OP
// Every op above (backends/cpu/op_table.cpp): the CPU device's backend.
extern const OpTable kOpTable;
inline const OpTable& op_table() {
  return kOpTable;
}
}  // namespace cpu

// ---- Backends by device -------------------------------------------------------------------
// The OpTable ops:: dispatches to for each device is its Backend's (tensor/backend.h): the CPU's
// is built in (registered on first use, by op_dispatch.cpp); another device's comes with its
// backend's registration.
namespace detail {
// d's table when the backend of ctx.device has none yet: the CPU's (registered now), else an
// ft::Error naming the device and the op.
const OpTable& op_table_slow(Device device, OpId op);
}  // namespace detail

// ctx.device's table; an ft::Error naming the device and the op when no backend runs ops there.
inline const OpTable& backend_for(const ExecContext& ctx, OpId op) {
  const auto d = static_cast<size_t>(ctx.device);
  const OpTable* t = d < kNumDevices ? detail::g_op_tables[d].load(std::memory_order_acquire) : nullptr;
  if (t == nullptr) [[unlikely]]
    return detail::op_table_slow(ctx.device, op);
  return *t;
}

struct Backend;  // tensor/backend.h

// The CPU's Backend (backends/cpu/cpu_backend.cpp): registered by the first op or context.
const Backend& cpu_backend();
// ctx's backend (the CPU's registered first when it is the CPU); ft::Error when none.
const Backend& backend_of(const ExecContext& ctx);

// What the model calls: ops::rmsnorm_forward(ctx, out, rstd, x, w, N, C, eps) runs the op on
// ctx.device, through that device's table (one indirect call).
namespace ops {
#define FT_OP(name, params, args)                                  \
  inline void name(const ExecContext& ctx, FT_OP_UNPAREN params) { \
    backend_for(ctx, OpId::name).name(ctx, FT_OP_UNPAREN args);    \
  }
#include "kernels/op_decls.inc"
#undef FT_OP
}  // namespace ops

}  // namespace ft

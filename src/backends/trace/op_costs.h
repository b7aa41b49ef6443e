// What each op of the list (kernels/op_decls.inc) costs on a GPU, as the CUDA backend runs it
// (src/backends/cuda): the bytes its kernels move through device memory, the FLOPs they execute
// and how many kernels it launches — one function per op, with the op's own parameters, so a new
// op without its cost fails to link the recording backend (backends/trace/trace_backend.cpp).
//
//   plan::OpRecord r = trace::cost::matmul_bf16(C, A, B, M, N, K, false, true, 0.0f);
//   r.flops == 2.0 * M * N * K;  r.kind == plan::OpKind::kGemm;
//
// Conventions (stated once, used by every function):
//   - bytes count each operand once, as a kernel that streams it from device memory (HBM) would:
//     fp32 4, bf16/fp16 2, int32 4, double 8 bytes an element; a tile re-read from L2 is not
//     counted again; in-place updates count a read and a write;
//   - FLOPs are those the kernel executes: 2 per multiply-add; causal attention computes half of
//     its (T, T) scores, so a T×T×D product of one head counts T²·D FLOPs, not 2·T²·D;
//   - helper kernels inside an op (the fp32 → bf16 rounding of matmul's operands) are
//     side_bytes / side_kernels of the op's record: memory-bound work beside the main kernel;
//   - elementwise FLOPs are rough (a few per element) and never decide an elementwise op's price:
//     its bytes do.
#pragma once

#include <cstdint>

#include "kernels/ops.h"
#include "plan/op_trace.h"

namespace ft::trace::cost {

#define FT_OP(name, params, args) plan::OpRecord name(FT_OP_UNPAREN params);
#include "kernels/op_decls.inc"
#undef FT_OP

// A block attention record (attention_block_forward/backward) with the (query, key) pairs its
// causal mask lets through per (sequence, head), where they are known (the ring's blocks: the
// dry run's cp_op_trace.h, and the timed CPU, which reads the positions): the shape gains
// " pairs=N" — a block's time depends on them, not on Tk alone, so a profile keeps the blocks of
// one shape apart — and the FLOPs count those pairs (forward 4·B·H·pairs·D, backward 14·...).
void set_block_pairs(plan::OpRecord& r, double pairs, int64_t B, int64_t H, int64_t D);
// The pairs of a block from its ascending host positions: Σ over queries of the keys at or before it.
double block_pairs(const int32_t* pos_q, const int32_t* pos_k, int64_t Tq, int64_t Tk);

}  // namespace ft::trace::cost

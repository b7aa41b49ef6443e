// backends/cuda/cuda_ops.h — the CUDA backend's ops, in two layers:
//   - the OpTable's ops (one per entry of kernels/op_decls.inc, taking the ExecContext first):
//     what ops:: dispatches to for Device::kCUDA once the backend is registered (op_table.cpp,
//     runtime.h). Each finds its CudaContext in ctx.backend, runs the op below and, under
//     FT_CUDA_SYNC_CHECK=1, synchronises and names the op on a fault;
//   - the same ops on a CudaContext (below), plus the GPU-only ops (cuDNN attention on
//     bf16/fp16, conversions) that the library's own code and tests call.
//
//   ExecContext ctx = make_exec_context(Device::kCUDA, 0);
//   ops::matmul(ctx, C, A, B, M, N, K, false, true, 0.0f, Precision::kBF16);   // -> cuda::matmul
//
// Every pointer is device memory (host memory is an error the CUDA runtime reports at the launch,
// named by the op). Ops queue work on the context's stream and return without waiting; reductions
// (sum_squares, sum_in_order) add into a double in device memory. Semantics, layouts and
// conventions are those of kernels/ops.h and op_decls.inc; the reference (ft::ref) is what tests
// compare against: tests/cuda/kernels_cuda_test.cpp runs every row of the op harness (tests/ops)
// through this backend's table on a GPU (scripts/gpu_check.sh, stage 1).
//
// Determinism: no op uses floating-point atomics; every reduction runs in a fixed order with a
// fixed launch geometry, so the same inputs give bit-identical outputs run to run on one GPU model
// (the GEMM and cuDNN algorithms the libraries' heuristics choose for a shape are fixed for a
// given library version and GPU).
#pragma once

#include <cstdint>
#include <string>

#include "backends/cuda/context.h"
#include "kernels/ops.h"

namespace ft::cuda {

// ---- the OpTable's ops ------------------------------------------------------------------------
#define FT_OP(name, params, args) void name(const ExecContext& ctx, FT_OP_UNPAREN params);
#include "kernels/op_decls.inc"
#undef FT_OP

// Every op above: the CUDA device's backend (op_table.cpp).
const OpTable& op_table();

// ---- the ops on a CudaContext ------------------------------------------------------------------
// The same list with the CudaContext first (what the OpTable's ops above call, and the library's
// own CUDA code and tests): an op of op_decls.inc without its CUDA version fails to link
// (op_table.cpp takes every one). How the CUDA versions do it, where that matters:
//   matmul                cuBLASLt, fp32 with CUBLAS_COMPUTE_32F (no TF32); kBF16/kF16 round the
//                         fp32 inputs first (to_bf16 kernels into the scratch), fp32 accumulation;
//   embedding_backward    deterministic: token positions sorted by row (a stable radix sort), each
//                         table row adds its tokens' gradients in token order — the reference's
//                         order, so bit-identical to ft::ref::embedding_backward;
//   attention_*           fp32 flash-style kernels of our own (attention.cu), mirroring
//                         backends/cpu/attention.cpp; head dimension up to 256;
//   attention_block_*     the same kernels with the mask by true position and the results merged
//                         into (added to) the buffers (attention_block.cu): context parallelism;
//   xent_shard_targets .. xent_loss_from_rows: vocab-parallel cross-entropy (xent_parallel.cu),
//                         one thread per row, the combine ops in double;
//   sum_squares           in double: a fixed grid of partial sums (launch.h), added in index order
//                         by one block, then added to *sum (device memory); nothing read back;
//   sum_in_order          one thread adds the elements one by one, as the CPU op's host loop
//                         does, so the bits are the CPU's (n is a chunk of token losses);
//   to_fp16, from_fp16    round to nearest even, overflow to ±inf (math::to_f16) / exact: NcclComm's
//                         fp16 wire;
//   gram_schmidt          PowerSGD (powersgd.cu): one block, dot products and norms as fixed-order
//                         block reductions in double; the error feedback elementwise.
#define FT_OP(name, params, args) void name(CudaContext& ctx, FT_OP_UNPAREN params);
#include "kernels/op_decls.inc"
#undef FT_OP

// ---- GPU-only ops ---------------------------------------------------------------------------

// y(n) = fp16(x(n)), round to nearest even (the operands of a Precision::kF16 GEMM).
void to_f16(CudaContext& ctx, uint16_t* y, const float* x, int64_t n);
// y(n) = fp32 of bf16 (or fp16) x(n).
void widen_bf16(CudaContext& ctx, float* y, const uint16_t* x, int64_t n);
void widen_f16(CudaContext& ctx, float* y, const uint16_t* x, int64_t n);

// Causal GQA attention on bf16 or fp16 tensors through cuDNN's SDPA (attention_sdpa.cpp, calling
// the cuDNN sub-plugin libfluxtrain_cudnn.so, loaded on the first call: cudnn_load.h):
// qkv (B, T, (H + 2 Hkv) D) read in place (Q, K and V are strided views of it: no copies),
// out (B, T, H D) in the same type, lse (B, H, T) fp32 natural-log as attention_forward's; the
// backward writes dqkv (B, T, (H + 2 Hkv) D) in the same type, with cuDNN's deterministic
// algorithm. Where cuDNN refuses the shape (or the build has no cuDNN, or the sub-plugin cannot be
// loaded: said once in the log), both fall back to the fp32 kernels above through fp32 copies in
// the scratch; the return value says which ran.
enum class LowPrecision : uint8_t { kBF16, kF16 };
enum class AttentionPath : uint8_t { kCudnn, kFp32Fallback };
AttentionPath attention_forward_lowp(CudaContext& ctx, uint16_t* out, float* lse, const uint16_t* qkv, int64_t B,
                                     int64_t T, int64_t H, int64_t Hkv, int64_t D, LowPrecision type);
AttentionPath attention_backward_lowp(CudaContext& ctx, uint16_t* dqkv, const uint16_t* dout, const uint16_t* qkv,
                                      const uint16_t* out, const float* lse, int64_t B, int64_t T, int64_t H,
                                      int64_t Hkv, int64_t D, LowPrecision type);
// Whether cuDNN SDPA can be used (the build has it and its sub-plugin loads: the first call loads
// it), and why not when it cannot.
bool have_cudnn_sdpa();
const char* cudnn_sdpa_missing_reason();
// Why cuDNN refused the last shape that fell back to the fp32 kernels ("" when none did).
const std::string& sdpa_refusal(CudaContext& ctx);

}  // namespace ft::cuda

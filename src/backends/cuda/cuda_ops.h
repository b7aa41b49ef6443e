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

// ---- the ops on a CudaContext (op_decls.inc's order) -------------------------------------------

// cuBLASLt: fp32 with CUBLAS_COMPUTE_32F (no TF32); kBF16/kF16 round the fp32 inputs first
// (to_bf16 kernels into the scratch) and accumulate in fp32.
void matmul(CudaContext& ctx, float* C, const float* A, const float* B, int64_t M, int64_t N, int64_t K, bool trans_a,
            bool trans_b, float beta, Precision precision);
void matmul_bf16(CudaContext& ctx, float* C, const uint16_t* A, const uint16_t* B, int64_t M, int64_t N, int64_t K,
                 bool trans_a, bool trans_b, float beta);

void embedding_forward(CudaContext& ctx, float* out, const int32_t* tokens, const float* table, int64_t N, int64_t C,
                       int64_t v0, int64_t V);
// Deterministic: token positions are sorted by row (a stable radix sort), and each table row adds
// its tokens' gradients in token order — the reference's order, so the result is bit-identical
// to ft::ref::embedding_backward.
void embedding_backward(CudaContext& ctx, float* dtable, const float* dout, const int32_t* tokens, int64_t N, int64_t C,
                        int64_t v0, int64_t V);

void rmsnorm_forward(CudaContext& ctx, float* out, float* rstd, const float* x, const float* weight, int64_t N,
                     int64_t C, float eps);
void rmsnorm_forward_bf16(CudaContext& ctx, uint16_t* out, float* rstd, const float* x, const float* weight, int64_t N,
                          int64_t C, float eps);
void rmsnorm_backward(CudaContext& ctx, float* dx, float* dweight, const float* dout, const float* x,
                      const float* weight, const float* rstd, int64_t N, int64_t C);

void rope_forward(CudaContext& ctx, float* qkv, const float* cos, const float* sin, int64_t B, int64_t T, int64_t H,
                  int64_t Hkv, int64_t D, int64_t pos0);
void rope_backward(CudaContext& ctx, float* dqkv, const float* cos, const float* sin, int64_t B, int64_t T, int64_t H,
                   int64_t Hkv, int64_t D, int64_t pos0);
void rope_tables(CudaContext& ctx, float* cos, float* sin, int64_t max_pos, int64_t D, float theta);

// fp32 flash-style kernels of our own (attention.cu), mirroring backends/cpu/attention.cpp; head
// dimension up to 256.
void attention_forward(CudaContext& ctx, float* out, float* lse, const float* qkv, int64_t B, int64_t T, int64_t H,
                       int64_t Hkv, int64_t D);
void attention_backward(CudaContext& ctx, float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D);

void kv_cache_write(CudaContext& ctx, float* k_cache, float* v_cache, const float* qkv, int64_t B, int64_t T, int64_t H,
                    int64_t Hkv, int64_t D, int64_t pos0, int64_t max_T);
void attention_decode(CudaContext& ctx, float* out, const float* qkv, const float* k_cache, const float* v_cache,
                      int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv, int64_t D, int64_t max_T);

void swiglu_forward(CudaContext& ctx, float* out, const float* gate_up, int64_t N, int64_t F);
void swiglu_forward_bf16(CudaContext& ctx, uint16_t* out, const float* gate_up, int64_t N, int64_t F);
void swiglu_backward(CudaContext& ctx, float* dgate_up, const float* dout, const float* gate_up, int64_t N, int64_t F);
void swiglu_backward_bf16(CudaContext& ctx, uint16_t* dgate_up, const float* dout, const float* gate_up, int64_t N,
                          int64_t F);

void xent_forward(CudaContext& ctx, float* loss, float* lse, const float* logits, const int32_t* targets, int64_t N,
                  int64_t V);
void xent_backward(CudaContext& ctx, float* dlogits, const float* logits, const float* lse, const int32_t* targets,
                   int64_t N, int64_t V, float scale);
void xent_backward_bf16(CudaContext& ctx, uint16_t* dlogits, const float* logits, const float* lse,
                        const int32_t* targets, int64_t N, int64_t V, float scale);

// Vocab-parallel cross-entropy (xent_parallel.cu): one thread per row; the combine ops in double.
void xent_shard_targets(CudaContext& ctx, int32_t* local, const int32_t* targets, int64_t N, int64_t v0, int64_t V);
void xent_target_logit(CudaContext& ctx, float* target_logit, const float* logits, const int32_t* targets, int64_t N,
                       int64_t V);
void xent_combine_max(CudaContext& ctx, double* row_max, const float* lse, int64_t N);
void xent_combine_sums(CudaContext& ctx, double* sums, const float* lse, const float* target_logit,
                       const double* row_max, int64_t N);
void xent_combine_finish(CudaContext& ctx, float* lse, float* target_logit, const double* row_max, const double* sums,
                         int64_t N);
void xent_loss_from_rows(CudaContext& ctx, float* loss, const float* lse, const float* target_logit,
                         const int32_t* targets, int64_t N);

void add_inplace(CudaContext& ctx, float* y, const float* x, int64_t n);
void scale_inplace(CudaContext& ctx, float* y, float a, int64_t n);
// *sum += Σ x², in double: a fixed grid of partial sums (launch.h), added in index order by one
// block, then added to *sum (device memory). Nothing is read back.
void sum_squares(CudaContext& ctx, double* sum, const float* x, int64_t n);
// *sum += x(0), += x(1), ...: one thread adds the elements one by one, as the host loop of the
// CPU op does, so the bits are the CPU's (n is a chunk of token losses).
void sum_in_order(CudaContext& ctx, double* sum, const float* x, int64_t n);
void to_bf16(CudaContext& ctx, uint16_t* y, const float* x, int64_t n);
// y(n) = the fp32 value of the bf16 x(n) (exact).
void from_bf16(CudaContext& ctx, float* y, const uint16_t* x, int64_t n);
// y(n) = fp16(x(n)), round to nearest even, overflow to ±inf (math::to_f16); y(n) = fp32 of the
// fp16 x(n), exact: NcclComm's fp16 wire.
void to_fp16(CudaContext& ctx, uint16_t* y, const float* x, int64_t n);
void from_fp16(CudaContext& ctx, float* y, const uint16_t* x, int64_t n);

// PowerSGD (powersgd.cu): Gram–Schmidt by one block (dot products and norms as fixed-order block
// reductions in double), the error feedback elementwise.
void gram_schmidt(CudaContext& ctx, float* P, int64_t n, int64_t r);
void powersgd_error_feedback(CudaContext& ctx, float* error, float* grad, const float* approx, float ranks, int64_t n);

void adamw_step(CudaContext& ctx, float* param, float* m, float* v, uint16_t* param_bf16, const float* grad, int64_t n,
                float lr, float beta1, float beta2, float eps, float weight_decay, int64_t step, float grad_scale);

// ---- GPU-only ops ---------------------------------------------------------------------------

// y(n) = fp16(x(n)), round to nearest even (the operands of a Precision::kF16 GEMM).
void to_f16(CudaContext& ctx, uint16_t* y, const float* x, int64_t n);
// y(n) = fp32 of bf16 (or fp16) x(n).
void widen_bf16(CudaContext& ctx, float* y, const uint16_t* x, int64_t n);
void widen_f16(CudaContext& ctx, float* y, const uint16_t* x, int64_t n);

// Causal GQA attention on bf16 or fp16 tensors through cuDNN's SDPA (attention_sdpa.cpp):
// qkv (B, T, (H + 2 Hkv) D) read in place (Q, K and V are strided views of it: no copies),
// out (B, T, H D) in the same type, lse (B, H, T) fp32 natural-log as attention_forward's; the
// backward writes dqkv (B, T, (H + 2 Hkv) D) in the same type, with cuDNN's deterministic
// algorithm. Where cuDNN refuses the shape (or the build has no cuDNN), both fall back to the fp32
// kernels above through fp32 copies in the scratch; the return value says which ran.
enum class LowPrecision : uint8_t { kBF16, kF16 };
enum class AttentionPath : uint8_t { kCudnn, kFp32Fallback };
AttentionPath attention_forward_lowp(CudaContext& ctx, uint16_t* out, float* lse, const uint16_t* qkv, int64_t B,
                                     int64_t T, int64_t H, int64_t Hkv, int64_t D, LowPrecision type);
AttentionPath attention_backward_lowp(CudaContext& ctx, uint16_t* dqkv, const uint16_t* dout, const uint16_t* qkv,
                                      const uint16_t* out, const float* lse, int64_t B, int64_t T, int64_t H,
                                      int64_t Hkv, int64_t D, LowPrecision type);
// Whether this build has cuDNN SDPA, and why not when it has not.
bool have_cudnn_sdpa();
const char* cudnn_sdpa_missing_reason();
// Why cuDNN refused the last shape that fell back to the fp32 kernels ("" when none did).
const std::string& sdpa_refusal(CudaContext& ctx);

}  // namespace ft::cuda

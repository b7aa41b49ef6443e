// One cost function per op (op_costs.h has the conventions). Each mirrors the CUDA backend's
// kernels for the op (src/backends/cuda/<file>.cu, named beside each group), so the recorded
// trace is what that backend would launch.
#include "backends/trace/op_costs.h"

#include <fmt/format.h>

#include <algorithm>

#include "backends/cuda/launch.h"

namespace ft::trace::cost {
namespace {

using plan::OpKind;
using plan::OpRecord;

constexpr double kF32 = 4, kB16 = 2, kI32 = 4, kF64 = 8;

double d(int64_t v) {
  return static_cast<double>(v);
}

OpRecord rec(const char* op, std::string shape, double read, double written, double flops, int kernels = 1,
             OpKind kind = OpKind::kElementwise) {
  OpRecord r;
  r.op = op;
  r.shape = std::move(shape);
  r.kind = kind;
  r.bytes_read = read;
  r.bytes_written = written;
  r.flops = flops;
  r.kernels = kernels;
  return r;
}

// A cuBLASLt GEMM (gemm.cpp): A and B read once at `in` bytes an element, D written at `out` bytes
// (fp32, or bf16 when the epilogue rounds), C read first when beta = 1 (accumulating into D, or
// the residual added in the epilogue).
OpRecord gemm(const char* op, int64_t M, int64_t N, int64_t K, bool ta, bool tb, float beta, Precision p, double in,
              double out = kF32) {
  OpRecord r = rec(op,
                   fmt::format("M={} N={} K={} tA={:d} tB={:d} beta={:g} {}{}", M, N, K, ta, tb, beta,
                               precision_label(p), out == kB16 ? " out bf16" : ""),
                   in * d(M * K + K * N) + (beta != 0 ? out * d(M * N) : 0), out * d(M * N), 2.0 * d(M) * d(N) * d(K),
                   1, OpKind::kGemm);
  r.gemm = plan::GemmShape{.M = M, .N = N, .K = K, .trans_a = ta, .trans_b = tb, .beta = beta, .precision = p};
  return r;
}

std::string n_shape(int64_t n) {
  return fmt::format("n={}", n);
}
std::string nc_shape(int64_t N, int64_t C) {
  return fmt::format("N={} C={}", N, C);
}
std::string attn_shape(int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D) {
  return fmt::format("B={} T={} H={} Hkv={} D={}", B, T, H, Hkv, D);
}

// One causal T×T×D product over every (b, h): B·H·T²·D FLOPs (half of the full 2·T²·D per head).
double causal_product(int64_t B, int64_t T, int64_t H, int64_t D) {
  return d(B) * d(H) * d(T) * d(T) * d(D);
}

}  // namespace

// ---- GEMM (gemm.cpp) ------------------------------------------------------------------------

// kBF16 / kF16 with fp32 operands: both are rounded into scratch first (two to_bf16 kernels:
// read fp32, write 16-bit), then the 16-bit GEMM reads the rounded copies. kF32: fp32 operands on
// the CUDA cores (CUBLAS_COMPUTE_32F, no TF32).
OpRecord matmul(float*, const float*, const float*, int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b,
                float beta, Precision precision) {
  if (precision == Precision::kF32) return gemm("matmul", M, N, K, trans_a, trans_b, beta, precision, kF32);
  OpRecord r = gemm("matmul", M, N, K, trans_a, trans_b, beta, precision, kB16);
  r.side_bytes = (kF32 + kB16) * d(M * K + K * N);
  r.side_kernels = 2;
  return r;
}

OpRecord matmul_bf16(float*, const uint16_t*, const uint16_t*, int64_t M, int64_t N, int64_t K, bool trans_a,
                     bool trans_b, float beta) {
  return gemm("matmul_bf16", M, N, K, trans_a, trans_b, beta, Precision::kBF16, kB16);
}
// The residual R read by the epilogue (C = R, beta = 1), D written.
OpRecord matmul_bf16_add(float*, const float*, const uint16_t*, const uint16_t*, int64_t M, int64_t N, int64_t K,
                         bool trans_a, bool trans_b) {
  return gemm("matmul_bf16_add", M, N, K, trans_a, trans_b, 1.0f, Precision::kBF16, kB16);
}
OpRecord matmul_bf16_rounded(uint16_t*, const uint16_t*, const uint16_t*, int64_t M, int64_t N, int64_t K, bool trans_a,
                             bool trans_b) {
  return gemm("matmul_bf16_rounded", M, N, K, trans_a, trans_b, 0.0f, Precision::kBF16, kB16, kB16);
}

// ---- Embedding (embedding.cu) ----------------------------------------------------------------

OpRecord embedding_forward(float*, const int32_t*, const float*, int64_t N, int64_t C, int64_t, int64_t) {
  return rec("embedding_forward", nc_shape(N, C), kI32 * d(N) + kF32 * d(N * C), kF32 * d(N * C), 0);
}

// Keys kernel (token -> row, position), a cub radix sort of N (key, value) pairs of 32 bits (about
// four passes reading and writing both: 4 × 16 bytes a pair; its launches counted as 5), then a
// block per row adding its positions' gradient rows: dout read once, each touched table row read
// and written (at most min(N, V) rows).
OpRecord embedding_backward(float*, const float*, const int32_t*, int64_t N, int64_t C, int64_t, int64_t V) {
  const double rows = d(std::min(N, V));
  return rec("embedding_backward", nc_shape(N, C) + fmt::format(" V={}", V),
             kI32 * d(N) + 4 * 8 * d(N) + kF32 * d(N * C) + kF32 * rows * d(C),
             8 * d(N) + 4 * 8 * d(N) + kF32 * rows * d(C), d(N * C), 7);
}

// ---- RMSNorm (rmsnorm.cu) --------------------------------------------------------------------

OpRecord rmsnorm_forward(float*, float*, const float*, const float*, int64_t N, int64_t C, float) {
  return rec("rmsnorm_forward", nc_shape(N, C), kF32 * d(N * C + C), kF32 * d(N * C + N), 4 * d(N * C));
}
OpRecord rmsnorm_forward_bf16(uint16_t*, float*, const float*, const float*, int64_t N, int64_t C, float) {
  return rec("rmsnorm_forward_bf16", nc_shape(N, C), kF32 * d(N * C + C), kB16 * d(N * C) + kF32 * d(N), 4 * d(N * C));
}
// One pass (C ≤ 6144, rms_one_pass): a block per chunk of rows reads dout, x (and the residual's
// gradient) once, writes dx and its chunk's dweight partial (8 bytes a column); then the partials
// summed per column. Wider rows: dx, then the partials reading dout and x again.
OpRecord rmsnorm_backward(float*, float*, const float*, const float* dresidual, const float*, const float*,
                          const float*, int64_t N, int64_t C) {
  const double chunks = d(cuda::rms_chunks(N));
  const bool one_pass = cuda::rms_one_pass(C);
  const double rows = d(N * C) * (one_pass ? 2 : 4) + (dresidual ? d(N * C) : 0);
  return rec("rmsnorm_backward", nc_shape(N, C) + (dresidual ? " +residual" : ""),
             kF32 * (rows + d(C) + d(N)) + kF64 * chunks * d(C), kF32 * d(N * C + C) + kF64 * chunks * d(C),
             10 * d(N * C), one_pass ? 2 : 3);
}

// ---- RoPE (rope.cu) --------------------------------------------------------------------------

// In place on the query and key heads of qkv; the cos/sin rows of the T positions read once.
OpRecord rope_forward(float*, const float*, const float*, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D,
                      int64_t) {
  const double n = d(B * T * (H + Hkv) * D);
  return rec("rope_forward", attn_shape(B, T, H, Hkv, D), kF32 * (n + d(T * D)), kF32 * n, 3 * n);
}
OpRecord rope_backward(float*, const float*, const float*, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D,
                       int64_t) {
  const double n = d(B * T * (H + Hkv) * D);
  return rec("rope_backward", attn_shape(B, T, H, Hkv, D), kF32 * (n + d(T * D)), kF32 * n, 3 * n);
}
// The bf16 forms (rope.cu's rope_bf16_kernel, and rope_values_kernel copying the value heads when
// out is not in): the pairs read and written in bf16, the tables' rows read.
OpRecord rope_forward_bf16(uint16_t* out, const uint16_t* in, const float*, const float*, int64_t B, int64_t T,
                           int64_t H, int64_t Hkv, int64_t D, int64_t) {
  const double n = d(B * T * (H + Hkv) * D), v = out == in ? 0 : d(B * T * Hkv * D);
  return rec("rope_forward_bf16", attn_shape(B, T, H, Hkv, D), kB16 * (n + v) + kF32 * d(T * D), kB16 * (n + v), 3 * n,
             v > 0 ? 2 : 1);
}
OpRecord rope_backward_bf16(uint16_t* out, const uint16_t* in, const float*, const float*, int64_t B, int64_t T,
                            int64_t H, int64_t Hkv, int64_t D, int64_t) {
  const double n = d(B * T * (H + Hkv) * D), v = out == in ? 0 : d(B * T * Hkv * D);
  return rec("rope_backward_bf16", attn_shape(B, T, H, Hkv, D), kB16 * (n + v) + kF32 * d(T * D), kB16 * (n + v), 3 * n,
             v > 0 ? 2 : 1);
}
OpRecord rope_tables(float*, float*, int64_t max_pos, int64_t D, float) {
  return rec("rope_tables", fmt::format("max_pos={} D={}", max_pos, D), 0, kF32 * d(max_pos * D), 4 * d(max_pos * D));
}

// ---- Attention (attention.cu: the fp32 CUDA-core flash kernels) ------------------------------

// Two causal products (S = q kᵀ, out = P v): 2·B·H·T²·D FLOPs. qkv read, out and lse written (the
// key/value tiles each query block re-reads come from L2).
OpRecord attention_forward(float*, float*, const float*, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D) {
  OpRecord r = rec("attention_forward", attn_shape(B, T, H, Hkv, D), kF32 * d(B * T * (H + 2 * Hkv) * D),
                   kF32 * d(B * T * H * D + B * H * T), 2 * causal_product(B, T, H, D), 1, OpKind::kFlashFp32);
  r.attention = plan::AttentionShape{.B = B, .T = T, .H = H, .Hkv = Hkv, .D = D, .backward = false};
  return r;
}

// Three kernels: delta = rowsum(dO ∘ O); dQ (recomputes S and dP = dO vᵀ, then dS k: 3 products);
// dK, dV (recomputes S and dP again, then dSᵀ q and Pᵀ dO: 4 products) — 7·B·H·T²·D FLOPs, where
// a backward that keeps nothing recomputed twice (cuDNN's, FlashAttention-2's) executes 5.
OpRecord attention_backward(float*, const float*, const float*, const float*, const float*, int64_t B, int64_t T,
                            int64_t H, int64_t Hkv, int64_t D) {
  const double qkv = d(B * T * (H + 2 * Hkv) * D), o = d(B * T * H * D);
  OpRecord r = rec("attention_backward", attn_shape(B, T, H, Hkv, D), kF32 * (qkv + 3 * o + d(B * H * T)),
                   kF32 * (qkv + d(B * H * T)), 7 * causal_product(B, T, H, D), 3, OpKind::kFlashFp32);
  r.attention = plan::AttentionShape{.B = B, .T = T, .H = H, .Hkv = Hkv, .D = D, .backward = true};
  return r;
}

// Block attention (attention_block.cu, context parallelism's ring): as attention_forward/backward
// over a (Tq, Tk) block, priced as if every query saw the whole block (the causal diagonal block
// costs half: an upper bound). Forward: q and the block read, out and lse read and written.
// Backward: delta, dQ (3 products), dK/dV (4 products); dq, dk, dv read and written.
OpRecord attention_block_forward(float*, float*, const float*, const float*, const int32_t*, const int32_t*, int64_t B,
                                 int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv, int64_t D, bool accumulate) {
  const double o = d(B * Tq * H * D + B * H * Tq);
  return rec("attention_block_forward", fmt::format("{} Tk={}", attn_shape(B, Tq, H, Hkv, D), Tk),
             kF32 * (d(B * Tq * H * D) + d(B * Tk * 2 * Hkv * D) + (accumulate ? o : 0)), kF32 * o,
             4 * d(B * H) * d(Tq) * d(Tk) * d(D), 1, OpKind::kFlashFp32);
}
OpRecord attention_block_backward(float*, float*, const float*, const float*, const float*, const float*, const float*,
                                  const int32_t*, const int32_t*, int64_t B, int64_t Tq, int64_t Tk, int64_t H,
                                  int64_t Hkv, int64_t D) {
  const double q = d(B * Tq * H * D), kv = d(B * Tk * 2 * Hkv * D);
  return rec("attention_block_backward", fmt::format("{} Tk={}", attn_shape(B, Tq, H, Hkv, D), Tk),
             kF32 * (4 * q + 2 * kv + 2 * d(B * H * Tq)), kF32 * (q + kv + d(B * H * Tq)),
             14 * d(B * H) * d(Tq) * d(Tk) * d(D), 3, OpKind::kFlashFp32);
}

void set_block_pairs(OpRecord& r, double pairs, int64_t B, int64_t H, int64_t D) {
  const bool backward = r.op.starts_with("attention_block_backward");  // and _bf16
  r.shape += fmt::format(" pairs={:.0f}", pairs);
  r.flops = (backward ? 14 : 4) * d(B * H) * pairs * d(D);
}

double block_pairs(const int32_t* pos_q, const int32_t* pos_k, int64_t Tq, int64_t Tk) {
  double pairs = 0;
  int64_t seen = 0;  // keys at or before the query: a prefix of the block (both ascend)
  for (int64_t i = 0; i < Tq; ++i) {
    while (seen < Tk && pos_k[seen] <= pos_q[i]) ++seen;
    pairs += d(seen);
  }
  return pairs;
}

// The same in bf16 (the ring's blocks in bf16): the block kernels reading bf16 q, k, v (and dout,
// out), out, lse and dq in fp32, dk and dv in bf16.
OpRecord attention_block_forward_bf16(float*, float*, const uint16_t*, const uint16_t*, const int32_t*, const int32_t*,
                                      int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv, int64_t D,
                                      bool accumulate) {
  const double o = d(B * Tq * H * D + B * H * Tq);
  return rec("attention_block_forward_bf16", fmt::format("{} Tk={}", attn_shape(B, Tq, H, Hkv, D), Tk),
             kB16 * (d(B * Tq * H * D) + d(B * Tk * 2 * Hkv * D)) + kF32 * (accumulate ? o : 0), kF32 * o,
             4 * d(B * H) * d(Tq) * d(Tk) * d(D), 1, OpKind::kFlashFp32);
}
OpRecord attention_block_backward_bf16(float*, uint16_t*, const uint16_t*, const uint16_t*, const uint16_t*,
                                       const uint16_t*, const float*, const int32_t*, const int32_t*, int64_t B,
                                       int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv, int64_t D) {
  const double q = d(B * Tq * H * D), kv = d(B * Tk * 2 * Hkv * D);
  return rec("attention_block_backward_bf16", fmt::format("{} Tk={}", attn_shape(B, Tq, H, Hkv, D), Tk),
             kB16 * (3 * q + 2 * kv) + kF32 * (q + 2 * d(B * H * Tq)), kF32 * (q + d(B * H * Tq)) + kB16 * kv,
             14 * d(B * H) * d(Tq) * d(Tk) * d(D), 3, OpKind::kFlashFp32);
}

// The bf16 attention (attention_bf16.cpp): cuDNN SDPA, one fused kernel each way; priced at
// cuDNN's rate for the shape (plan/roofline). FLOPs as FlashAttention counts them: forward 2
// causal products (q kᵀ, P v), backward 2.5 times that (S and dP recomputed once, dV, dQ, dK).
OpRecord attention_forward_bf16(uint16_t*, float*, const uint16_t*, int64_t B, int64_t T, int64_t H, int64_t Hkv,
                                int64_t D) {
  OpRecord r = rec("attention_forward_bf16", attn_shape(B, T, H, Hkv, D), kB16 * d(B * T * (H + 2 * Hkv) * D),
                   kB16 * d(B * T * H * D) + kF32 * d(B * H * T), 2 * causal_product(B, T, H, D), 1, OpKind::kSdpa);
  r.attention = plan::AttentionShape{.B = B, .T = T, .H = H, .Hkv = Hkv, .D = D, .backward = false};
  return r;
}
OpRecord attention_backward_bf16(uint16_t*, const uint16_t*, const uint16_t*, const uint16_t*, const float*, int64_t B,
                                 int64_t T, int64_t H, int64_t Hkv, int64_t D) {
  const double qkv = d(B * T * (H + 2 * Hkv) * D), o = d(B * T * H * D);
  OpRecord r = rec("attention_backward_bf16", attn_shape(B, T, H, Hkv, D), kB16 * (qkv + 2 * o) + kF32 * d(B * H * T),
                   kB16 * qkv, 5 * causal_product(B, T, H, D), 1, OpKind::kSdpa);
  r.attention = plan::AttentionShape{.B = B, .T = T, .H = H, .Hkv = Hkv, .D = D, .backward = true};
  return r;
}

// ---- KV cache and decoding (generation; never in a training step) ------------------------------

OpRecord kv_cache_write(float*, float*, const float*, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D, int64_t,
                        int64_t) {
  const double n = d(2 * B * T * Hkv * D);
  return rec("kv_cache_write", attn_shape(B, T, H, Hkv, D), kF32 * n, kF32 * n, 0);
}
OpRecord attention_decode(float*, const float*, const float*, const float*, int64_t B, int64_t Tq, int64_t Tk,
                          int64_t H, int64_t Hkv, int64_t D, int64_t) {
  OpRecord r = rec("attention_decode", attn_shape(B, Tq, H, Hkv, D) + fmt::format(" Tk={}", Tk),
                   kF32 * d(B * Tq * (H + 2 * Hkv) * D + 2 * B * Hkv * Tk * D), kF32 * d(B * Tq * H * D),
                   4 * d(B) * d(H) * d(Tq) * d(Tk) * d(D), 1, OpKind::kFlashFp32);
  r.attention = plan::AttentionShape{.B = B, .T = Tk, .H = H, .Hkv = Hkv, .D = D, .backward = false};
  return r;
}

// ---- SwiGLU (swiglu.cu) ------------------------------------------------------------------------

OpRecord swiglu_forward(float*, const float*, int64_t N, int64_t F) {
  return rec("swiglu_forward", fmt::format("N={} F={}", N, F), kF32 * d(2 * N * F), kF32 * d(N * F), 6 * d(N * F));
}
OpRecord swiglu_forward_bf16(uint16_t*, const uint16_t*, int64_t N, int64_t F) {
  return rec("swiglu_forward_bf16", fmt::format("N={} F={}", N, F), kB16 * d(2 * N * F), kB16 * d(N * F), 6 * d(N * F));
}
OpRecord swiglu_backward(float*, const float*, const float*, int64_t N, int64_t F) {
  return rec("swiglu_backward", fmt::format("N={} F={}", N, F), kF32 * d(3 * N * F), kF32 * d(2 * N * F),
             10 * d(N * F));
}
OpRecord swiglu_backward_bf16(uint16_t*, const uint16_t*, const uint16_t*, int64_t N, int64_t F) {
  return rec("swiglu_backward_bf16", fmt::format("N={} F={}", N, F), kB16 * d(3 * N * F), kB16 * d(2 * N * F),
             10 * d(N * F));
}

// ---- Cross-entropy (xent.cu, xent_parallel.cu) ---------------------------------------------------

// A block per row: the row's logits streamed once (its second pass hits L1/L2), lse and loss out.
OpRecord xent_forward(float*, float*, const float*, const int32_t*, int64_t N, int64_t V) {
  return rec("xent_forward", fmt::format("N={} V={}", N, V), kF32 * d(N * V) + kI32 * d(N), kF32 * d(2 * N),
             4 * d(N * V));
}
OpRecord xent_backward(float*, const float*, const float*, const int32_t*, int64_t N, int64_t V, float) {
  return rec("xent_backward", fmt::format("N={} V={}", N, V), kF32 * d(N * V + N) + kI32 * d(N), kF32 * d(N * V),
             4 * d(N * V));
}
OpRecord xent_backward_bf16(uint16_t*, const float*, const float*, const int32_t*, int64_t N, int64_t V, float) {
  return rec("xent_backward_bf16", fmt::format("N={} V={}", N, V), kF32 * d(N * V + N) + kI32 * d(N), kB16 * d(N * V),
             4 * d(N * V));
}
OpRecord xent_shard_targets(int32_t*, const int32_t*, int64_t N, int64_t, int64_t) {
  return rec("xent_shard_targets", n_shape(N), kI32 * d(N), kI32 * d(N), d(N));
}
OpRecord xent_target_logit(float*, const float*, const int32_t*, int64_t N, int64_t V) {
  return rec("xent_target_logit", fmt::format("N={} V={}", N, V), kI32 * d(N) + kF32 * d(N), kF32 * d(N), 0);
}
OpRecord xent_combine_max(double*, const float*, int64_t N) {
  return rec("xent_combine_max", n_shape(N), kF32 * d(N), kF64 * d(N), 0);
}
OpRecord xent_combine_sums(double*, const float*, const float*, const double*, int64_t N) {
  return rec("xent_combine_sums", n_shape(N), (2 * kF32 + kF64) * d(N), 2 * kF64 * d(N), 2 * d(N));
}
OpRecord xent_combine_finish(float*, float*, const double*, const double*, int64_t N) {
  return rec("xent_combine_finish", n_shape(N), 3 * kF64 * d(N), 2 * kF32 * d(N), 2 * d(N));
}
OpRecord xent_loss_from_rows(float*, const float*, const float*, const int32_t*, int64_t N) {
  return rec("xent_loss_from_rows", n_shape(N), (2 * kF32 + kI32) * d(N), kF32 * d(N), d(N));
}

// ---- Elementwise (elementwise.cu) ----------------------------------------------------------------

OpRecord add_inplace(float*, const float*, int64_t n) {
  return rec("add_inplace", n_shape(n), 2 * kF32 * d(n), kF32 * d(n), d(n));
}
// Partial sums per block, then their sum (two kernels).
OpRecord sum_squares(double*, const float*, int64_t n) {
  return rec("sum_squares", n_shape(n), kF32 * d(n), kF64, 2 * d(n), 2);
}
// One thread adds the n elements in order (the host loop's bits): latency-bound, not bandwidth.
OpRecord sum_in_order(double*, const float*, int64_t n) {
  OpRecord r = rec("sum_in_order", n_shape(n), kF32 * d(n) + kF64, kF64, d(n), 1, OpKind::kSerial);
  r.serial = n;
  return r;
}
OpRecord to_bf16(uint16_t*, const float*, int64_t n) {
  return rec("to_bf16", n_shape(n), kF32 * d(n), kB16 * d(n), d(n));
}
OpRecord from_bf16(float*, const uint16_t*, int64_t n) {
  return rec("from_bf16", n_shape(n), kB16 * d(n), kF32 * d(n), 0);
}
OpRecord to_fp16(uint16_t*, const float*, int64_t n) {
  return rec("to_fp16", n_shape(n), kF32 * d(n), kB16 * d(n), d(n));
}
OpRecord from_fp16(float*, const uint16_t*, int64_t n) {
  return rec("from_fp16", n_shape(n), kB16 * d(n), kF32 * d(n), 0);
}

// ---- PowerSGD (powersgd.cu) ------------------------------------------------------------------------

// Column j is projected against the j columns before it: about r²/2 column reads and 2·n·r² FLOPs.
OpRecord gram_schmidt(float*, int64_t n, int64_t r) {
  return rec("gram_schmidt", fmt::format("n={} r={}", n, r), kF32 * d(n) * d(r) * d(r + 1) / 2, kF32 * d(n * r),
             2 * d(n) * d(r) * d(r), static_cast<int>(std::max<int64_t>(1, 2 * r)));
}
OpRecord powersgd_error_feedback(float*, float*, const float*, float, int64_t n) {
  return rec("powersgd_error_feedback", n_shape(n), 2 * kF32 * d(n), 2 * kF32 * d(n), 2 * d(n));
}

// ---- Optimizer (adamw.cu) ------------------------------------------------------------------------------

// param, m, v and grad read; param, m, v written (and the bf16 copy when asked). The step's
// scalars (16 bytes, read by every thread from cache) are not counted.
OpRecord adamw_step(float*, float*, float*, uint16_t* param_bf16, const float*, int64_t n, const AdamwStepScalars*,
                    float, float, float, float) {
  return rec("adamw_step", n_shape(n), 4 * kF32 * d(n), 3 * kF32 * d(n) + (param_bf16 ? kB16 * d(n) : 0), 15 * d(n));
}

}  // namespace ft::trace::cost

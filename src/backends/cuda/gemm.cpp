// matmul, matmul_bf16 and its two epilogue forms (matmul_bf16_add: D = A·B + R with C = R ≠ D;
// matmul_bf16_rounded: a bf16 D) through cuBLASLt (see gemm_plan.h for the row-major mapping).
//
// fp32: CUBLAS_COMPUTE_32F with fp32 operands, which cuBLASLt never runs in TF32 (that takes
// CUBLAS_COMPUTE_32F_FAST_TF32), so fp32 means fp32 as on the CPU. kBF16 / kF16: the fp32
// operands are rounded into the context's scratch (to_bf16 / to_f16 kernels), then a 16-bit GEMM
// with fp32 accumulation and fp32 C — the contract of op_decls.inc (CUBLAS_COMPUTE_32F_FAST_16BF
// would round fp32 operands itself but may use TF32, so it is not used). beta = 1 accumulates
// into C (weight gradients). Plans (descriptors + the heuristic's algorithm) are cached per shape,
// type and pointer alignment.
#include <fmt/format.h>

#include <algorithm>

#include "backends/cuda/context.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/gemm_plan.h"
#include "util/error.h"

namespace ft::cuda {

namespace {

cudaDataType_t cuda_type(GemmType t) {
  switch (t) {
    case GemmType::kBF16:
      return CUDA_R_16BF;
    case GemmType::kF16:
      return CUDA_R_16F;
    case GemmType::kF32:
      break;
  }
  return CUDA_R_32F;
}

template <typename T>
void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, T value) {
  FT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &value, sizeof value), "matmul", {"attribute", attr});
}

template <typename T>
void set_pref(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr, T value) {
  FT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p, attr, &value, sizeof value), "matmul", {"attribute", attr});
}

size_t align_up(size_t x, size_t a) {
  return (x + a - 1) / a * a;
}

// Where a GEMM writes: D = op(A)·op(B) + beta · C, C and D of type `out` (C == D but for the
// residual epilogue of matmul_bf16_add).
struct GemmOut {
  void* D;
  const void* C;
  float beta;
  GemmType out = GemmType::kF32;
};

size_t type_bytes(GemmType t) {
  return t == GemmType::kF32 ? 4 : 2;
}

void run_gemm(CudaContext& ctx, const char* op, GemmOut o, const void* A, const void* B, int64_t M, int64_t N,
              int64_t K, bool trans_a, bool trans_b, GemmType type) {
  require(M >= 0 && N >= 0 && K >= 0, op, "negative size", {{"M", M}, {"N", N}, {"K", K}});
  require(o.beta == 0.0f || o.beta == 1.0f, op, "beta must be 0 or 1", {{"M", M}, {"N", N}, {"K", K}});
  if (M == 0 || N == 0) return;
  const size_t out_bytes = static_cast<size_t>(M * N) * type_bytes(o.out);
  if (K == 0) {  // D = beta C
    if (o.beta == 0.0f)
      FT_CUDA_CHECK(cudaMemsetAsync(o.D, 0, out_bytes, ctx.stream()), op, {"M", M}, {"N", N}, {"K", K});
    else if (o.C != o.D)
      FT_CUDA_CHECK(cudaMemcpyAsync(o.D, o.C, out_bytes, cudaMemcpyDeviceToDevice, ctx.stream()), op, {"M", M},
                    {"N", N}, {"K", K});
    return;
  }
  const GemmCache::Plan& plan =
      ctx.gemm_cache().get(ctx, M, N, K, trans_a, trans_b, type, pointer_alignment(A), pointer_alignment(B),
                           std::min(pointer_alignment(o.C), pointer_alignment(o.D)), o.out);
  const float alpha = 1.0f;
  // cuBLASLt's A is our B and its B our A (gemm_plan.h).
  FT_CUBLAS_CHECK(cublasLtMatmul(ctx.cublaslt(), plan.desc.op, &alpha, B, plan.desc.a, A, plan.desc.b, &o.beta, o.C,
                                 plan.desc.c, o.D, plan.desc.c, &plan.algo, ctx.cublaslt_workspace(),
                                 CudaContext::kCublasWorkspaceBytes, ctx.stream()),
                  op, {"M", M}, {"N", N}, {"K", K}, {"trans_a", trans_a}, {"trans_b", trans_b});
  FT_CUDA_CHECK_QUEUED(ctx, op, {"M", M}, {"N", N}, {"K", K}, {"trans_a", trans_a}, {"trans_b", trans_b});
}

void run_gemm(CudaContext& ctx, const char* op, float* C, const void* A, const void* B, int64_t M, int64_t N, int64_t K,
              bool trans_a, bool trans_b, float beta, GemmType type) {
  run_gemm(ctx, op, GemmOut{C, C, beta}, A, B, M, N, K, trans_a, trans_b, type);
}

}  // namespace

GemmDescriptors::GemmDescriptors(const GemmMapping& g, GemmType type, GemmType out) {
  const char* op = "matmul";
  try {
    FT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&this->op, CUBLAS_COMPUTE_32F, CUDA_R_32F), op, {"m", g.m});
    set_desc(this->op, CUBLASLT_MATMUL_DESC_TRANSA, g.op_a_t ? CUBLAS_OP_T : CUBLAS_OP_N);
    set_desc(this->op, CUBLASLT_MATMUL_DESC_TRANSB, g.op_b_t ? CUBLAS_OP_T : CUBLAS_OP_N);
    const cudaDataType_t t = cuda_type(type);
    FT_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&a, t, static_cast<uint64_t>(g.a_rows), static_cast<uint64_t>(g.a_cols), g.lda), op,
        {"rows", g.a_rows}, {"cols", g.a_cols});
    FT_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&b, t, static_cast<uint64_t>(g.b_rows), static_cast<uint64_t>(g.b_cols), g.ldb), op,
        {"rows", g.b_rows}, {"cols", g.b_cols});
    FT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&c, cuda_type(out), static_cast<uint64_t>(g.c_rows),
                                               static_cast<uint64_t>(g.c_cols), g.ldc),
                    op, {"rows", g.c_rows}, {"cols", g.c_cols});
  } catch (...) {
    destroy();
    throw;
  }
}

GemmDescriptors::~GemmDescriptors() {
  destroy();
}

void GemmDescriptors::destroy() noexcept {
  if (c) cublasLtMatrixLayoutDestroy(c);
  if (b) cublasLtMatrixLayoutDestroy(b);
  if (a) cublasLtMatrixLayoutDestroy(a);
  if (op) cublasLtMatmulDescDestroy(op);
  c = b = a = nullptr;
  op = nullptr;
}

const GemmCache::Plan& GemmCache::get(CudaContext& ctx, int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b,
                                      GemmType type, int align_a, int align_b, int align_c, GemmType out) {
  const Key key{M, N, K, trans_a, trans_b, type, align_a, align_b, align_c, out};
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;

  auto plan = std::make_unique<Plan>(map_row_major(M, N, K, trans_a, trans_b), type, out);
  cublasLtMatmulPreference_t pref = nullptr;
  FT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref), "matmul", {"M", M}, {"N", N}, {"K", K});
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  try {
    set_pref(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t{CudaContext::kCublasWorkspaceBytes});
    // cuBLASLt's A is our B (gemm_plan.h).
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, static_cast<uint32_t>(align_b));
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, static_cast<uint32_t>(align_a));
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, static_cast<uint32_t>(align_c));
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, static_cast<uint32_t>(align_c));
    FT_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(ctx.cublaslt(), plan->desc.op, plan->desc.a, plan->desc.b,
                                                   plan->desc.c, plan->desc.c, pref, 1, &result, &found),
                    "matmul", {"M", M}, {"N", N}, {"K", K}, {"trans_a", trans_a}, {"trans_b", trans_b});
  } catch (...) {
    cublasLtMatmulPreferenceDestroy(pref);
    throw;
  }
  cublasLtMatmulPreferenceDestroy(pref);
  if (found == 0)
    throw Error(fmt::format("CUDA op matmul (M={} N={} K={} trans_a={} trans_b={}): cuBLASLt has no algorithm "
                            "for this shape and alignment ({} / {} / {} bytes)",
                            M, N, K, trans_a, trans_b, align_a, align_b, align_c),
                "pass operands aligned to 16 bytes (cuBLASLt's tensor-core kernels need it)");
  plan->algo = result.algo;
  return *plans_.emplace(key, std::move(plan)).first->second;
}

void matmul(CudaContext& ctx, float* C, const float* A, const float* B, int64_t M, int64_t N, int64_t K, bool trans_a,
            bool trans_b, float beta, Precision precision) {
  if (precision == Precision::kF32)
    return run_gemm(ctx, "matmul", C, A, B, M, N, K, trans_a, trans_b, beta, GemmType::kF32);
  require(M >= 0 && N >= 0 && K >= 0, "matmul", "negative size", {{"M", M}, {"N", N}, {"K", K}});
  // Both operands rounded into the scratch, B 256 bytes after A.
  const size_t a_bytes = align_up(static_cast<size_t>(M * K) * 2, 256);
  auto* a16 = static_cast<uint16_t*>(ctx.scratch(a_bytes + static_cast<size_t>(K * N) * 2, "matmul"));
  auto* b16 = reinterpret_cast<uint16_t*>(reinterpret_cast<char*>(a16) + a_bytes);
  const bool bf16 = precision == Precision::kBF16;
  if (bf16) {
    to_bf16(ctx, a16, A, M * K);
    to_bf16(ctx, b16, B, K * N);
  } else {
    to_f16(ctx, a16, A, M * K);
    to_f16(ctx, b16, B, K * N);
  }
  run_gemm(ctx, "matmul", C, a16, b16, M, N, K, trans_a, trans_b, beta, bf16 ? GemmType::kBF16 : GemmType::kF16);
}

void matmul_bf16(CudaContext& ctx, float* C, const uint16_t* A, const uint16_t* B, int64_t M, int64_t N, int64_t K,
                 bool trans_a, bool trans_b, float beta) {
  run_gemm(ctx, "matmul_bf16", C, A, B, M, N, K, trans_a, trans_b, beta, GemmType::kBF16);
}

void matmul_bf16_add(CudaContext& ctx, float* D, const float* R, const uint16_t* A, const uint16_t* B, int64_t M,
                     int64_t N, int64_t K, bool trans_a, bool trans_b) {
  run_gemm(ctx, "matmul_bf16_add", GemmOut{D, R, 1.0f}, A, B, M, N, K, trans_a, trans_b, GemmType::kBF16);
}

void matmul_bf16_rounded(CudaContext& ctx, uint16_t* C, const uint16_t* A, const uint16_t* B, int64_t M, int64_t N,
                         int64_t K, bool trans_a, bool trans_b) {
  run_gemm(ctx, "matmul_bf16_rounded", GemmOut{C, C, 0.0f, GemmType::kBF16}, A, B, M, N, K, trans_a, trans_b,
           GemmType::kBF16);
}

}  // namespace ft::cuda

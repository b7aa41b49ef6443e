// How a row-major GEMM of op_decls.inc maps onto cuBLASLt (column-major), and the cuBLASLt
// descriptors cached per shape. The mapping and the descriptors need no GPU, so
// tests/cuda/cuda_gemm_layout_test.cpp checks them on any machine with the toolkit: it reads
// the descriptors back and runs the mapped problem through a column-major reference GEMM.
//
// Row-major C(M, N) is column-major Cᵀ (N, M), and Cᵀ = op(B)ᵀ op(A)ᵀ: cuBLASLt computes
// m = N, n = M, k = K with its "A" our B and its "B" our A, each keeping its own transpose flag.
//
//   GemmMapping g = map_row_major(M, N, K, trans_a, trans_b);
//   GemmDescriptors d(g, GemmType::kBF16);      // cuBLASLt matmul desc + A, B, C layouts
#pragma once

#include <cublasLt.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

namespace ft::cuda {

class CudaContext;

struct GemmMapping {
  int64_t m, n, k;              // cuBLASLt's problem: D(m, n) = op(A)(m, k) · op(B)(k, n)
  bool op_a_t, op_b_t;          // cuBLASLt's transpose flags of its A (our B) and B (our A)
  int64_t a_rows, a_cols, lda;  // cuBLASLt's A (our B) as stored, column-major
  int64_t b_rows, b_cols, ldb;  // cuBLASLt's B (our A)
  int64_t c_rows, c_cols, ldc;  // C and D: (N, M), ld N
};

constexpr GemmMapping map_row_major(int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b) {
  GemmMapping g{};
  g.m = N;
  g.n = M;
  g.k = K;
  g.op_a_t = trans_b;  // B row-major (K, N) is column-major (N, K): op N gives (m, k)
  g.op_b_t = trans_a;  // A row-major (M, K) is column-major (K, M): op N gives (k, n)
  g.a_rows = trans_b ? K : N;
  g.a_cols = trans_b ? N : K;
  g.lda = g.a_rows;
  g.b_rows = trans_a ? M : K;
  g.b_cols = trans_a ? K : M;
  g.ldb = g.b_rows;
  g.c_rows = N;
  g.c_cols = M;
  g.ldc = N;
  return g;
}

// Operand type (and output type: C and D are fp32, or bf16 for matmul_bf16_rounded); accumulation
// CUBLAS_COMPUTE_32F (never TF32) with fp32 scalars.
enum class GemmType : uint8_t { kF32, kBF16, kF16 };

// The matmul descriptor and the three layouts of one mapped problem (C and D share a layout).
// Creation needs no device. Throws ft::Error if cuBLASLt refuses.
struct GemmDescriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  GemmDescriptors(const GemmMapping& g, GemmType type, GemmType out = GemmType::kF32);
  ~GemmDescriptors();
  GemmDescriptors(const GemmDescriptors&) = delete;
  GemmDescriptors& operator=(const GemmDescriptors&) = delete;

 private:
  void destroy() noexcept;
};

// Largest power of two (up to 256) that divides the address: cuBLASLt's algorithms depend on it.
inline int pointer_alignment(const void* p) {
  auto u = reinterpret_cast<uintptr_t>(p);
  int a = 1;
  while (a < 256 && (u % static_cast<uintptr_t>(2 * a)) == 0) a *= 2;
  return a;
}

// One plan per (shape, operand type, pointer alignments): descriptors + the heuristic's algorithm.
class GemmCache {
 public:
  struct Plan {
    GemmDescriptors desc;
    cublasLtMatmulAlgo_t algo;
    Plan(const GemmMapping& g, GemmType t, GemmType out) : desc(g, t, out), algo{} {}
  };
  // align_c: the smaller of C's and D's alignments.
  const Plan& get(CudaContext& ctx, int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b, GemmType type,
                  int align_a, int align_b, int align_c, GemmType out = GemmType::kF32);
  size_t size() const { return plans_.size(); }

 private:
  using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, GemmType, int, int, int, GemmType>;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace ft::cuda

// What the CPU GEMM (kernels/cpu/gemm.cpp, behind ops::matmul and ops::matmul_bf16) can say
// about itself: which oneDNN implementation a shape runs on, how many primitives are cached; and
// the fp32 matmul primitive the benchmark compares dnnl_sgemm with.
//
//   std::string impl = ft::cpu::gemm_impl_name(2048, 2048, 2048, false, false, Precision::kBF16);
//   // "brg:avx512_core_amx_bf16" on a CPU with AMX
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/ops.h"

namespace ft::cpu {

// The implementation ops::matmul runs for C(M, N) = op(A) op(B) (beta 0) at this precision with the
// current OpenMP thread count: "gemm:jit (dnnl_sgemm)" for fp32, the matmul primitive's for bf16
// (created and cached if needed).
std::string gemm_impl_name(int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b,
                           Precision precision);

// The oneDNN matmul primitive in fp32 (cached like the bf16 ones). Not what ops::matmul uses for
// fp32 (dnnl_sgemm is faster here); kept for the peak benchmark's comparison.
void matmul_f32_primitive(float* C, const float* A, const float* B, int64_t M, int64_t N, int64_t K,
                          bool trans_a, bool trans_b, float beta);
// The implementation the matmul primitive picks at this precision ("brg:avx512_core", ...).
std::string gemm_primitive_impl_name(int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b,
                                     Precision precision);

// Number of matmul primitives in the process-wide cache.
size_t gemm_cache_size();

}  // namespace ft::cpu

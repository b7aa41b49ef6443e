// What the CPU GEMM (kernels/cpu/gemm.cpp, behind ops::matmul and ops::matmul_bf16) can say
// about itself: which oneDNN implementation a shape runs on, and how many primitives are cached.
//
//   std::string impl = ft::cpu::gemm_impl_name(2048, 2048, 2048, false, false, Precision::kBF16);
//   // "brg:avx512_core_amx_bf16" on a CPU with AMX
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/ops.h"

namespace ft::cpu {

// The oneDNN implementation chosen for C(M, N) = op(A) op(B) (beta 0) at this precision with the
// current OpenMP thread count (creates and caches the primitive if needed).
std::string gemm_impl_name(int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b,
                           Precision precision);

// Number of matmul primitives in the process-wide cache.
size_t gemm_cache_size();

}  // namespace ft::cpu

// The GEMM that the emulated cublasLtMatmul (cublaslt_sim.cpp) runs as a kernel on the SIMT executor:
// one CUDA thread per tile of 16 rows x 32 columns of D, so every read of A, B and C and every write
// of D is checked against the device allocations like any kernel's (A's and B's as one range per
// thread, C's and D's as one per column of its tile: vgpu::range_access), and a bounds error names
// the GEMM (its shape, types, transposes and leading dimensions are the kernel's name).
// Column-major operands, fp32 accumulation in ascending k with fused multiply-adds,
// D = alpha · acc + beta · C (C not read when beta is 0), the result rounded to nearest even into
// D's type.
//
//   vgpu::LtGemm g{m, n, k, A, CUDA_R_16BF, lda, false, B, CUDA_R_16BF, ldb, true, ...};
//   vgpu::lt_gemm_launch(g, "cublasLtMatmul(m=5 n=3 k=7 ...)", stream);
#pragma once

#include <cstdint>

#include "vgpu/cuda_sim.h"

namespace vgpu {

struct LtGemm {
  int64_t m, n, k;
  const void* A;
  int a_type;  // cudaDataType_t
  int64_t lda;
  bool trans_a;
  const void* B;
  int b_type;
  int64_t ldb;
  bool trans_b;
  const void* C;
  int c_type;
  int64_t ldc;
  void* D;
  int d_type;
  int64_t ldd;
  float alpha, beta;
};

// Runs the GEMM to completion; throws vgpu::Error (the executor's report) on a bad access.
void lt_gemm_launch(const LtGemm& g, const char* name, cudaStream_t stream);

}  // namespace vgpu

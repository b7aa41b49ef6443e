// OpenBLAS and BLIS for the fp32 GEMM, loaded at run time (dlopen), not linked:
//   - the build works where either is absent, and a missing one is a row in bench-peak, not a
//     failure;
//   - Debian ships each as pthread, OpenMP and serial builds; we load the OpenMP build
//     (libopenblas0-openmp, libblis4-openmp), whose threads are libgomp's, the pool our kernels
//     and oneDNN use — never a second pool busy-waiting against ours;
//   - both read their kernel choice (OPENBLAS_CORETYPE, BLIS_ARCH_TYPE) when loaded or first
//     used, so it can be set first: when unset and oneDNN is limited to AVX2 on an AVX-512 CPU
//     (ONEDNN_MAX_CPU_ISA=AVX2, the AVX2 simulation), the AVX2 kernels (Zen or Haswell); when
//     unset on an AVX-512 CPU, OpenBLAS gets SkylakeX (Debian's 0.3.21 picks a Prescott kernel on
//     CPUs it does not know).
//
//   const ft::cpu::BlasLibrary& ob = ft::cpu::openblas_library();
//   if (ob.sgemm) ob.gemm(C, A, B, M, N, K, trans_a, trans_b, beta);   // row-major, OpenMP threads
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace ft::cpu {

struct BlasLibrary {
  // cblas_sgemm(order, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  // order 101 = row-major, trans 111 = no, 112 = yes. Null when the library could not be loaded.
  void (*sgemm)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                int) = nullptr;
  std::function<void(int)> set_num_threads;
  std::string path;     // the file loaded
  std::string version;  // "OpenBLAS 0.3.21", "BLIS 0.9.0"
  std::string kernels;  // OpenBLAS core ("Zen", "SkylakeX"), BLIS configuration ("zen3")
  bool openmp = false;  // the OpenMP build (one thread pool with ours)
  std::string env;      // "OPENBLAS_CORETYPE=Zen (set by fluxtrain)", "" when unset
  std::string note;     // why it is unavailable, or a caveat

  // C(M, N) = op(A) op(B) + beta C, row-major, on the current OpenMP thread count.
  void gemm(float* C, const float* A, const float* B, int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b,
            float beta) const;
};

const BlasLibrary& openblas_library();  // thread-safe; loads once
const BlasLibrary& blis_library();

}  // namespace ft::cpu

// What the CPU GEMM (backends/cpu/gemm.cpp, behind ops::matmul and ops::matmul_bf16) runs on and
// can say about itself.
//
//   fp32  one of three libraries, chosen per CPU by measurement (`fluxtrain bench-peak` records
//         the fastest on the model's shapes): oneDNN's dnnl_sgemm (the default), OpenBLAS or BLIS
//         (Debian's OpenMP builds, loaded at run time: cpu/blas_libraries.h). FLUXTRAIN_GEMM =
//         onednn | openblas | blis overrides the choice.
//   bf16  native: oneDNN's matmul primitive where oneDNN's ISA has bf16 instructions
//         (AVX512-BF16, AMX; ONEDNN_MAX_CPU_ISA lowers it); elsewhere emulated with the same
//         numerics: the bf16 operands widened to fp32 (exact) and the fp32 GEMM, with a
//         one-time warning.
//   fp16  operands rounded to fp16 (F16C), then the fp32 GEMM.
//
//   if (!ft::cpu::onednn_has_native_bf16()) ...   // bf16 would be emulated here
//   ft::log_info("GEMM: {}", ft::cpu::gemm_backend_summary());
//   // "fp32: oneDNN sgemm; bf16: oneDNN brg:avx512_core_bf16 (native); fp16: ..."
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "backends/cpu/native_precision.h"
#include "kernels/ops.h"

namespace ft::cpu {

// ---- fp32 libraries -----------------------------------------------------------------------

enum class GemmLibrary : uint8_t { kOneDnn = 0, kOpenBlas = 1, kBlis = 2 };
inline constexpr GemmLibrary kGemmLibraries[] = {GemmLibrary::kOneDnn, GemmLibrary::kOpenBlas, GemmLibrary::kBlis};

const char* gemm_library_name(GemmLibrary lib);  // "onednn", "openblas", "blis"
std::optional<GemmLibrary> gemm_library_from_name(std::string_view name);

// Whether the library can run in this process; `detail` names its build and kernels
// ("oneDNN 2.6.3 gemm:jit", "OpenBLAS 0.3.21 (OpenMP) core Zen", "BLIS 0.9.0 (OpenMP) zen3"),
// `note` why it cannot run, or a caveat.
struct GemmLibraryStatus {
  bool available = false;
  std::string detail, note;
};
GemmLibraryStatus gemm_library_status(GemmLibrary lib);

// The fp32 GEMM through one library, whatever ops::matmul would choose (benchmarks, tests).
// Throws ft::Error when the library is unavailable.
void matmul_f32_with(GemmLibrary lib, float* C, const float* A, const float* B, int64_t M, int64_t N, int64_t K,
                     bool trans_a, bool trans_b, float beta);

// The library ops::matmul uses for fp32 at the current OpenMP thread count: FLUXTRAIN_GEMM if
// set (an unknown or unavailable library is an ft::Error), else the choice recorded in the peak
// file for this CPU, ISA and thread count (backends/cpu/peak.h), else oneDNN.
GemmLibrary f32_gemm_library();
// Forgets the resolved choices, so the next call reads the environment and the peak file again
// (after bench-peak records a new choice; tests).
void reset_f32_gemm_library();

// ---- what runs ----------------------------------------------------------------------------

// Which ISA oneDNN runs (onednn_isa_name(): GEMM choices and peaks are recorded per ISA) and
// whether bf16 GEMMs run natively (onednn_has_native_bf16(): the matmul primitive; false: emulated
// through the fp32 GEMM) come from backends/cpu/native_precision.h, included here.
// Why bf16 is emulated ("this CPU has neither AVX512-BF16 nor AMX", "ONEDNN_MAX_CPU_ISA=AVX2
// limits oneDNN to avx2"), or "" when native.
std::string bf16_emulation_reason();

// One line for the start-up log: what each precision runs on.
std::string gemm_backend_summary();

// The implementation ops::matmul runs for C(M, N) = op(A) op(B) (beta 0) at this precision with the
// current OpenMP thread count: "oneDNN sgemm (gemm:jit)" for fp32 with oneDNN, the matmul
// primitive's for native bf16 (created and cached if needed), "fp32 <library> (bf16 widened)"...
std::string gemm_impl_name(int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b, Precision precision);

// The oneDNN matmul primitive in fp32 (cached like the bf16 ones). Not what ops::matmul uses for
// fp32 (dnnl_sgemm is faster here); kept for the peak benchmark's comparison.
void matmul_f32_primitive(float* C, const float* A, const float* B, int64_t M, int64_t N, int64_t K, bool trans_a,
                          bool trans_b, float beta);
// The implementation the matmul primitive picks at this precision ("brg:avx512_core", ...).
// Throws ft::Error when oneDNN has none (bf16 below AVX-512).
std::string gemm_primitive_impl_name(int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b, Precision precision);

// oneDNN's own bf16 matmul primitive, whatever onednn_has_native_bf16() says: on avx512_core it
// emulates bf16 (benchmarks compare it with the widening path). Throws ft::Error where oneDNN
// has no bf16 matmul.
void matmul_bf16_onednn(float* C, const uint16_t* A, const uint16_t* B, int64_t M, int64_t N, int64_t K, bool trans_a,
                        bool trans_b, float beta);
// The widening path (bf16 operands to fp32, then the fp32 GEMM), whatever onednn_has_native_bf16() says.
void matmul_bf16_widened(float* C, const uint16_t* A, const uint16_t* B, int64_t M, int64_t N, int64_t K, bool trans_a,
                         bool trans_b, float beta);

// Number of matmul primitives in the process-wide cache.
size_t gemm_cache_size();

}  // namespace ft::cpu

// GEMM beyond the op harness's rows (tests/ops/rows_gemm.cpp: every transpose, beta, precision on
// odd shapes): the fp32 primitive and each fp32 library, bf16 operands against the fp32-operand
// entry point, the empty reduction, the primitive cache, calls from several threads, the linear
// gradients from transposes.
#include "backends/cpu/gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "fd_check.h"
#include "kernels/ops.h"
#include "kernels/ref/ref_impl.h"
#include "tensor/dtype.h"
#include "util/cpu_info.h"

namespace ft {
namespace {

using test::random_floats;
const ExecContext& ctx = cpu_context();

// Forward error bound of a K-term dot product in fp32: |C − C_exact| <= 2 K u (|A| |B|)_ij
// (+ one rounding of beta · C). A wrong transpose or a dropped beta is O(1) off, far outside.
::testing::AssertionResult gemm_close(const std::vector<float>& got, const std::vector<float>& want,
                                      const std::vector<float>& absA, const std::vector<float>& absB,
                                      const std::vector<float>& C0, int64_t M, int64_t N, int64_t K, bool ta, bool tb,
                                      float beta) {
  std::vector<float> bound(M * N);
  ref::matmul(ctx, bound.data(), absA.data(), absB.data(), M, N, K, ta, tb, 0.0f, Precision::kF32);
  const double u = 0x1p-24;
  for (int64_t i = 0; i < M * N; ++i) {
    double allowed = 2.0 * static_cast<double>(K + 2) * u * (bound[i] + std::fabs(beta * C0[i])) + 1e-30;
    double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= allowed)) {
      return ::testing::AssertionFailure() << "C[" << i / N << ", " << i % N << "] = " << got[i] << ", want " << want[i]
                                           << " (error " << err << " > bound " << allowed << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

std::vector<float> abs_of(std::vector<float> v) {
  for (float& x : v) x = std::fabs(x);
  return v;
}

std::vector<float> round_bf16(std::vector<float> v) {
  for (float& x : v) x = bf16_to_f32(f32_to_bf16(x));
  return v;
}

// The fp32 matmul primitive the peak benchmark compares with (ops::matmul against the reference
// is the op harness's matmul row, tests/ops/rows_gemm.cpp).
TEST(Gemm, Fp32PrimitiveMatchesReference) {
  for (auto [M, N, K] : {std::make_tuple(1, 1, 1), std::make_tuple(7, 13, 5), std::make_tuple(33, 17, 65),
                         std::make_tuple(128, 96, 64), std::make_tuple(67, 257, 129)}) {
    for (int t = 0; t < 8; ++t) {
      const bool ta = t & 1, tb = t & 2;
      const float beta = (t & 4) ? 1.0f : 0.0f;
      auto A = random_floats(int64_t(M) * K, 1 + M), B = random_floats(int64_t(K) * N, 2 + N);
      auto C0 = random_floats(int64_t(M) * N, 3);
      auto C = C0, C_ref = C0;
      cpu::matmul_f32_primitive(C.data(), A.data(), B.data(), M, N, K, ta, tb, beta);
      ref::matmul(ctx, C_ref.data(), A.data(), B.data(), M, N, K, ta, tb, beta, Precision::kF32);
      EXPECT_TRUE(gemm_close(C, C_ref, abs_of(A), abs_of(B), C0, M, N, K, ta, tb, beta))
          << "M=" << M << " N=" << N << " K=" << K << " ta=" << ta << " tb=" << tb << " beta=" << beta;
    }
  }
}

TEST(Gemm, Bf16OperandsMatchReference) {
  for (auto [M, N, K] : {std::make_tuple(5, 3, 7), std::make_tuple(96, 80, 200)}) {
    for (int t = 0; t < 4; ++t) {
      bool ta = t & 1, tb = t & 2;
      auto Af = random_floats(int64_t(M) * K, 5), Bf = random_floats(int64_t(K) * N, 6);
      std::vector<uint16_t> A(Af.size()), B(Bf.size());
      convert(A.data(), DType::kBF16, Af.data(), DType::kF32, A.size());
      convert(B.data(), DType::kBF16, Bf.data(), DType::kF32, B.size());
      auto C0 = random_floats(int64_t(M) * N, 7);
      for (float beta : {0.0f, 1.0f}) {
        auto C = C0, C_ref = C0;
        cpu::matmul_bf16(ctx, C.data(), A.data(), B.data(), M, N, K, ta, tb, beta);
        ref::matmul_bf16(ctx, C_ref.data(), A.data(), B.data(), M, N, K, ta, tb, beta);
        EXPECT_TRUE(gemm_close(C, C_ref, abs_of(round_bf16(Af)), abs_of(round_bf16(Bf)), C0, M, N, K, ta, tb, beta))
            << "M=" << M << " N=" << N << " K=" << K << " ta=" << ta << " tb=" << tb << " beta=" << beta;
        // Same as the fp32-operand entry point at bf16 precision.
        auto C3 = C0;
        cpu::matmul(ctx, C3.data(), Af.data(), Bf.data(), M, N, K, ta, tb, beta, Precision::kBF16);
        EXPECT_EQ(C3, C);
      }
    }
  }
}

// The epilogue forms on the CPU are the GEMM and the separate pass the model ran before, bit for bit:
// matmul_bf16_add = matmul_bf16 then add_inplace (in place: beta = 1), matmul_bf16_rounded =
// matmul_bf16 then to_bf16.
TEST(Gemm, EpilogueFormsAreTheGemmThenItsPass) {
  const int64_t M = 33, N = 70, K = 129;
  auto Af = random_floats(M * K, 8), Bf = random_floats(N * K, 9), R = random_floats(M * N, 10);
  std::vector<uint16_t> A(Af.size()), B(Bf.size());
  convert(A.data(), DType::kBF16, Af.data(), DType::kF32, A.size());
  convert(B.data(), DType::kBF16, Bf.data(), DType::kF32, B.size());
  std::vector<float> want(M * N), got(M * N);
  cpu::matmul_bf16(ctx, want.data(), A.data(), B.data(), M, N, K, false, true, 0.0f);
  cpu::add_inplace(ctx, want.data(), R.data(), M * N);
  cpu::matmul_bf16_add(ctx, got.data(), R.data(), A.data(), B.data(), M, N, K, false, true);
  EXPECT_EQ(got, want);
  auto inplace = R, beta1 = R;
  cpu::matmul_bf16_add(ctx, inplace.data(), inplace.data(), A.data(), B.data(), M, N, K, false, true);
  cpu::matmul_bf16(ctx, beta1.data(), A.data(), B.data(), M, N, K, false, true, 1.0f);
  EXPECT_EQ(inplace, beta1);

  std::vector<float> c(M * N);
  std::vector<uint16_t> want16(M * N), got16(M * N);
  cpu::matmul_bf16(ctx, c.data(), A.data(), B.data(), M, N, K, false, true, 0.0f);
  cpu::to_bf16(ctx, want16.data(), c.data(), M * N);
  cpu::matmul_bf16_rounded(ctx, got16.data(), A.data(), B.data(), M, N, K, false, true);
  EXPECT_EQ(got16, want16);
}

TEST(Gemm, EmptyReductionIsBetaTimesC) {
  std::vector<float> C = {1.0f, 2.0f, 3.0f}, A(1), B(1);
  cpu::matmul(ctx, C.data(), A.data(), B.data(), 1, 3, 0, false, false, 1.0f, Precision::kF32);
  EXPECT_EQ(C, (std::vector<float>{1.0f, 2.0f, 3.0f}));
  cpu::matmul(ctx, C.data(), A.data(), B.data(), 3, 1, 0, false, false, 0.0f, Precision::kBF16);
  EXPECT_EQ(C, (std::vector<float>{0.0f, 0.0f, 0.0f}));
}

// The primitive cache (native bf16 and the fp32 primitive of the benchmarks share it).
TEST(Gemm, PrimitivesAreCachedPerShape) {
  auto A = random_floats(41 * 43, 8), B = random_floats(43 * 47, 9);
  std::vector<float> C(41 * 47);
  cpu::matmul_f32_primitive(C.data(), A.data(), B.data(), 41, 47, 43, false, false, 0.0f);
  size_t n = cpu::gemm_cache_size();
  cpu::matmul_f32_primitive(C.data(), A.data(), B.data(), 41, 47, 43, false, false, 0.0f);
  EXPECT_EQ(cpu::gemm_cache_size(), n);
  cpu::matmul_f32_primitive(C.data(), A.data(), B.data(), 41, 47, 43, false, false, 1.0f);  // beta is a key
  EXPECT_EQ(cpu::gemm_cache_size(), n + 1);
  cpu::matmul_f32_primitive(C.data(), A.data(), B.data(), 41, 47, 43, false, true, 1.0f);  // so is trans_b
  EXPECT_EQ(cpu::gemm_cache_size(), n + 2);
  cpu::matmul(ctx, C.data(), A.data(), B.data(), 41, 47, 43, false, false, 0.0f,
              Precision::kF32);  // sgemm: no primitive
  EXPECT_EQ(cpu::gemm_cache_size(), n + 2);
  cpu::matmul(ctx, C.data(), A.data(), B.data(), 41, 47, 43, false, false, 0.0f, Precision::kBF16);
  cpu::matmul(ctx, C.data(), A.data(), B.data(), 41, 47, 43, false, false, 0.0f, Precision::kBF16);
  EXPECT_EQ(cpu::gemm_cache_size(), n + 2 + (cpu::onednn_has_native_bf16() ? 1 : 0));  // emulated: no primitive
}

TEST(Gemm, ConcurrentCallersGetCorrectResults) {
  // Several threads share the primitive cache (same and different shapes) with their own scratch.
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  std::vector<int> ok(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &ok] {
      int M = 48 + 16 * (t % 2), N = 40, K = 72;
      auto A = random_floats(M * K, 100 + t), B = random_floats(K * N, 200 + t);
      bool all = true;
      for (int rep = 0; rep < 5; ++rep) {
        Precision p = rep % 2 ? Precision::kBF16 : Precision::kF32;
        std::vector<float> C(M * N), C_ref(M * N);
        cpu::matmul(ctx, C.data(), A.data(), B.data(), M, N, K, false, true, 0.0f, p);
        ref::matmul(ctx, C_ref.data(), A.data(), B.data(), M, N, K, false, true, 0.0f, p);
        all = all && test::all_close(C, C_ref, 1e-4, 1e-4);
      }
      ok[t] = all;
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_TRUE(ok[t]) << "thread " << t;
}

// Every fp32 library present on this machine, on every transpose and beta, against the reference:
// the same numerics class (fp32 products and accumulation), whichever bench-peak chooses.
TEST(GemmLibraries, EachPresentLibraryMatchesReference) {
  for (cpu::GemmLibrary lib : cpu::kGemmLibraries) {
    auto st = cpu::gemm_library_status(lib);
    if (!st.available) {
      std::printf("[  SKIPPED ] %s is not present: %s\n", cpu::gemm_library_name(lib), st.note.c_str());
      continue;
    }
    for (auto [M, N, K] : {std::make_tuple(1, 1, 1), std::make_tuple(33, 17, 65), std::make_tuple(67, 257, 129)}) {
      for (int t = 0; t < 8; ++t) {
        bool ta = t & 1, tb = t & 2;
        float beta = (t & 4) ? 1.0f : 0.0f;
        auto A = random_floats(int64_t(M) * K, 40 + t), B = random_floats(int64_t(K) * N, 50 + t);
        auto C0 = random_floats(int64_t(M) * N, 60 + t);
        auto C = C0, C_ref = C0;
        cpu::matmul_f32_with(lib, C.data(), A.data(), B.data(), M, N, K, ta, tb, beta);
        ref::matmul(ctx, C_ref.data(), A.data(), B.data(), M, N, K, ta, tb, beta, Precision::kF32);
        EXPECT_TRUE(gemm_close(C, C_ref, abs_of(A), abs_of(B), C0, M, N, K, ta, tb, beta))
            << cpu::gemm_library_name(lib) << " (" << st.detail << ") M=" << M << " N=" << N << " K=" << K
            << " ta=" << ta << " tb=" << tb << " beta=" << beta;
      }
    }
  }
}

// bf16 is native exactly where oneDNN's ISA has bf16 instructions; elsewhere it is emulated with
// the same numerics. Both paths agree with the reference (and with each other) where both run.
TEST(Gemm, Bf16EmulationMatchesNativeNumerics) {
  const std::string isa = cpu::onednn_isa_name();
  EXPECT_EQ(cpu::onednn_has_native_bf16(), isa == "avx512_core_bf16" || isa == "avx512_core_amx") << isa;
  EXPECT_EQ(cpu::bf16_emulation_reason().empty(), cpu::onednn_has_native_bf16());
  const int M = 37, N = 53, K = 300;
  auto Af = random_floats(M * K, 70), Bf = random_floats(K * N, 71);
  std::vector<uint16_t> A(Af.size()), B(Bf.size());
  convert(A.data(), DType::kBF16, Af.data(), DType::kF32, A.size());
  convert(B.data(), DType::kBF16, Bf.data(), DType::kF32, B.size());
  std::vector<float> C_ref(M * N), C(M * N), C0(M * N, 0.0f);
  ref::matmul_bf16(ctx, C_ref.data(), A.data(), B.data(), M, N, K, false, true, 0.0f);
  cpu::matmul_bf16_widened(C.data(), A.data(), B.data(), M, N, K, false, true, 0.0f);
  EXPECT_TRUE(gemm_close(C, C_ref, abs_of(round_bf16(Af)), abs_of(round_bf16(Bf)), C0, M, N, K, false, true, 0.0f));
  if (!cpu::onednn_has_native_bf16()) {
    std::printf("[  SKIPPED ] native bf16: %s\n", cpu::bf16_emulation_reason().c_str());
    return;
  }
  std::vector<float> C_native(M * N);
  cpu::matmul_bf16_onednn(C_native.data(), A.data(), B.data(), M, N, K, false, true, 0.0f);
  EXPECT_TRUE(gemm_close(C_native, C, abs_of(round_bf16(Af)), abs_of(round_bf16(Bf)), C0, M, N, K, false, true, 0.0f));
}

TEST(Gemm, BackendSummaryNamesEveryPrecision) {
  std::string s = cpu::gemm_backend_summary();
  EXPECT_NE(s.find("fp32: "), std::string::npos) << s;
  EXPECT_NE(s.find(cpu::onednn_has_native_bf16() ? "(native)" : "emulated"), std::string::npos) << s;
  EXPECT_NE(s.find("fp16: "), std::string::npos) << s;
}

TEST(Gemm, Bf16RunsOnAmxWhereTheCpuHasIt) {
  std::string impl = cpu::gemm_impl_name(256, 256, 256, false, false, Precision::kBF16);
  if (!cpu_info().amx_bf16) GTEST_SKIP() << "the CPU lacks the amx_bf16 flag (bf16 runs on " << impl << ")";
  if (cpu::onednn_isa_name().find("amx") == std::string::npos) {
    GTEST_SKIP() << "oneDNN is held below AMX (ISA " << cpu::onednn_isa_name() << ", ONEDNN_MAX_CPU_ISA)";
  }
  EXPECT_NE(impl.find("amx"), std::string::npos) << impl;
}

// GEMM has no backward op, but the model builds one from matmul transposes; check that the
// identities it relies on hold with the fast op: for C = A B,
//   dA = dC Bᵀ (matmul(dA, dC, B, trans_b)),  dB = Aᵀ dC (matmul(dB, A, dC, trans_a)).
TEST(Grad, MatmulTransposesGiveTheLinearGradients) {
  const int64_t M = 4, N = 5, K = 3;
  auto A = test::random_doubles(M * K, 51), B = test::random_doubles(K * N, 52), w = test::random_doubles(M * N, 53);
  auto loss_a = [&](const double* a) {
    std::vector<double> C(M * N);
    ref_impl::matmul(C.data(), a, B.data(), M, N, K, false, false, 0.0);
    return test::dot(w, C);
  };
  auto loss_b = [&](const double* b) {
    std::vector<double> C(M * N);
    ref_impl::matmul(C.data(), A.data(), b, M, N, K, false, false, 0.0);
    return test::dot(w, C);
  };
  auto fd_a = test::fd_gradient(loss_a, A), fd_b = test::fd_gradient(loss_b, B);
  auto Af = test::cast_vec<float>(A), Bf = test::cast_vec<float>(B), wf = test::cast_vec<float>(w);
  std::vector<float> dA(M * K), dB(K * N);
  cpu::matmul(ctx, dA.data(), wf.data(), Bf.data(), M, K, N, false, true, 0.0f, Precision::kF32);
  cpu::matmul(ctx, dB.data(), Af.data(), wf.data(), K, N, M, true, false, 0.0f, Precision::kF32);
  EXPECT_TRUE(test::all_close(dA, fd_a, 2e-4, 1e-5 * test::max_abs(fd_a)));
  EXPECT_TRUE(test::all_close(dB, fd_b, 2e-4, 1e-5 * test::max_abs(fd_b)));
}

}  // namespace
}  // namespace ft

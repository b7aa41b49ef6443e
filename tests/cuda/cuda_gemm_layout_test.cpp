// The GEMM mapping and descriptors of the CUDA backend (backends/cuda/gemm_plan.h), and its
// checked-call errors, on any machine with the toolkit (no GPU needed: cuBLASLt creates
// descriptors without a driver).
//   - map_row_major: the column-major problem it describes, run through a plain column-major
//     GEMM written here, gives ft::ref::matmul's row-major result, for every transpose pair;
//   - GemmDescriptors: the cuBLASLt matmul descriptor and layouts, read back attribute by
//     attribute (types, transposes, compute type without TF32, rows, columns, leading dims);
//   - FT_CUDA_CHECK / FT_CUBLAS_CHECK: the ft::Error names the op, its sizes, the call, file:line.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/context.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/gemm_plan.h"
#include "kernels/ops.h"
#include "util/error.h"

namespace ft::cuda {
namespace {

std::vector<float> random_floats(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// D(m, n) = op(A)(m, k) · op(B)(k, n), column-major, as BLAS defines it: element (i, j) of a
// stored matrix X with leading dimension ld is X[i + j ld].
void colmajor_gemm(float* Dm, const float* A, const float* B, const GemmMapping& g) {
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < g.k; ++p) {
        const float a = g.op_a_t ? A[p + i * g.lda] : A[i + p * g.lda];
        const float b = g.op_b_t ? B[j + p * g.ldb] : B[p + j * g.ldb];
        acc += static_cast<double>(a) * b;
      }
      Dm[i + j * g.ldc] = static_cast<float>(acc);
    }
}

TEST(CudaGemmMapping, ColumnMajorProblemIsTheRowMajorProduct) {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (auto [M, N, K] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 1, 1}, {3, 5, 7}, {17, 2, 33}}) {
        SCOPED_TRACE(testing::Message() << "M " << M << " N " << N << " K " << K << " ta " << ta << " tb " << tb);
        const auto A = random_floats(M * K, 1), B = random_floats(K * N, 2);
        std::vector<float> want(M * N), got(M * N, -1.0f);
        ref::matmul(cpu_context(), want.data(), A.data(), B.data(), M, N, K, ta, tb, 0.0f, Precision::kF32);
        const GemmMapping g = map_row_major(M, N, K, ta, tb);
        // cuBLASLt's A is our B, its B our A; the layouts' shapes must hold the stored data.
        EXPECT_EQ(g.a_rows * g.a_cols, K * N);
        EXPECT_EQ(g.b_rows * g.b_cols, M * K);
        EXPECT_EQ(g.c_rows * g.c_cols, M * N);
        EXPECT_EQ(g.op_a_t ? g.a_cols : g.a_rows, g.m);
        EXPECT_EQ(g.op_b_t ? g.b_rows : g.b_cols, g.n);
        colmajor_gemm(got.data(), B.data(), A.data(), g);
        for (int64_t i = 0; i < M * N; ++i) ASSERT_FLOAT_EQ(got[i], want[i]) << i;
      }
}

template <typename T>
T layout_attr(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t a) {
  T v{};
  size_t written = 0;
  EXPECT_EQ(cublasLtMatrixLayoutGetAttribute(l, a, &v, sizeof v, &written), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(written, sizeof v);
  return v;
}

template <typename T>
T desc_attr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a) {
  T v{};
  size_t written = 0;
  EXPECT_EQ(cublasLtMatmulDescGetAttribute(d, a, &v, sizeof v, &written), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(written, sizeof v);
  return v;
}

void expect_layout(cublasLtMatrixLayout_t l, cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld) {
  EXPECT_EQ(layout_attr<uint32_t>(l, CUBLASLT_MATRIX_LAYOUT_TYPE), static_cast<uint32_t>(type));
  EXPECT_EQ(layout_attr<uint64_t>(l, CUBLASLT_MATRIX_LAYOUT_ROWS), static_cast<uint64_t>(rows));
  EXPECT_EQ(layout_attr<uint64_t>(l, CUBLASLT_MATRIX_LAYOUT_COLS), static_cast<uint64_t>(cols));
  EXPECT_EQ(layout_attr<int64_t>(l, CUBLASLT_MATRIX_LAYOUT_LD), ld);
  EXPECT_EQ(layout_attr<int32_t>(l, CUBLASLT_MATRIX_LAYOUT_ORDER), CUBLASLT_ORDER_COL);
}

TEST(CudaGemmDescriptors, ReadBackAsMapped) {
  // The shapes of a llama-20m step (N tokens = 2048): QKV projection, its weight gradient (A
  // transposed, beta = 1), the LM head's input gradient (B transposed), and an odd one.
  for (auto [M, N, K, ta, tb] :
       std::vector<std::tuple<int64_t, int64_t, int64_t, bool, bool>>{{2048, 1152, 384, false, true},
                                                                      {1152, 384, 2048, true, false},
                                                                      {2048, 384, 32000, false, false},
                                                                      {3, 5, 7, true, true}}) {
    for (GemmType type : {GemmType::kF32, GemmType::kBF16, GemmType::kF16}) {
      SCOPED_TRACE(testing::Message() << "M " << M << " N " << N << " K " << K << " type " << int(type));
      const GemmMapping g = map_row_major(M, N, K, ta, tb);
      const GemmDescriptors d(g, type);
      const cudaDataType_t t = type == GemmType::kF32 ? CUDA_R_32F : type == GemmType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
      expect_layout(d.a, t, tb ? K : N, tb ? N : K, tb ? K : N);
      expect_layout(d.b, t, ta ? M : K, ta ? K : M, ta ? M : K);
      expect_layout(d.c, CUDA_R_32F, N, M, N);
      // fp32 accumulation, never TF32 (that would be CUBLAS_COMPUTE_32F_FAST_TF32), fp32 alpha/beta.
      EXPECT_EQ(desc_attr<int32_t>(d.op, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE), CUBLAS_COMPUTE_32F);
      EXPECT_EQ(desc_attr<int32_t>(d.op, CUBLASLT_MATMUL_DESC_SCALE_TYPE), CUDA_R_32F);
      EXPECT_EQ(desc_attr<int32_t>(d.op, CUBLASLT_MATMUL_DESC_TRANSA), tb ? CUBLAS_OP_T : CUBLAS_OP_N);
      EXPECT_EQ(desc_attr<int32_t>(d.op, CUBLASLT_MATMUL_DESC_TRANSB), ta ? CUBLAS_OP_T : CUBLAS_OP_N);
    }
  }
}

TEST(CudaGemmDescriptors, PointerAlignment) {
  alignas(256) static char buf[1024];
  EXPECT_EQ(pointer_alignment(buf), 256);
  EXPECT_EQ(pointer_alignment(buf + 16), 16);
  EXPECT_EQ(pointer_alignment(buf + 2), 2);
  EXPECT_EQ(pointer_alignment(buf + 3), 1);
  EXPECT_EQ(pointer_alignment(buf + 512), 256);
}

// ---- checked calls ------------------------------------------------------------------------

TEST(CudaChecks, FailedCallNamesOpSizesCallAndPlace) {
  const int line = __LINE__ + 2;
  try {
    FT_CUDA_CHECK(cudaSetDevice(-1), "rmsnorm_backward", {"N", 3}, {"C", 17});
    FAIL() << "cudaSetDevice(-1) succeeded";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rmsnorm_backward (N=3 C=17)"), std::string::npos) << what;
    EXPECT_NE(what.find("cudaSetDevice(-1)"), std::string::npos) << what;
    EXPECT_NE(what.find("tests/cuda/cuda_gemm_layout_test.cpp:" + std::to_string(line)), std::string::npos) << what;
    EXPECT_NE(what.find("cudaError"), std::string::npos) << what;  // the error's name
    EXPECT_FALSE(e.hint().empty());
  }
}

TEST(CudaChecks, CublasStatusIsNamed) {
  try {
    FT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(nullptr, CUDA_R_32F, 1, 1, 1), "matmul", {"M", 1});
    FAIL() << "a null layout pointer was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("matmul (M=1)"), std::string::npos) << what;
    EXPECT_NE(what.find("cublasStatus_t"), std::string::npos) << what;
  }
}

TEST(CudaChecks, RequireNamesTheSizes) {
  try {
    require(false, "attention_forward", "the fp32 CUDA attention supports head dimensions 1..256", {{"D", 300}},
            "hint text");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "CUDA op attention_forward (D=300): the fp32 CUDA attention supports head dimensions 1..256");
    EXPECT_EQ(e.hint(), "hint text");
  }
}

// Without a GPU a context cannot be made: a clear error, not a crash. With one, it can.
TEST(CudaChecks, ContextWithoutAGpuIsAClearError) {
  const std::string reason = no_device_reason();
  if (reason.empty()) {
    CudaContext ctx(0);
    EXPECT_NE(ctx.stream(), nullptr);
    ctx.synchronize();
    return;
  }
  std::cout << "no GPU here: " << reason << "\n";
  EXPECT_EQ(device_count(), 0);
  try {
    CudaContext ctx(0);
    FAIL() << "a CUDA context was created without a GPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CudaContext (device=0)"), std::string::npos) << e.what();
    EXPECT_FALSE(e.hint().empty());
  }
}

}  // namespace
}  // namespace ft::cuda

// cuBLASLt on the virtual GPU (cublaslt_sim.cpp): first the emulated cublasLtMatmul itself against
// ft::ref — every transpose pair, odd sizes, leading dimensions above the rows (the gaps hold NaN,
// so reading one shows), alpha/beta, C ≠ D, each type combination we use — and its documented status
// codes; then the GEMM rows of the op harness too large for vgpu_plugin_test (which runs the others)
// through the CUDA plugin on the virtual GPU (the real gemm.cpp: plans, heuristic, row-major
// mapping; the real context and runtime, buffers staged through pool memory) against ft::ref with
// the op harness's bounds, twice, bitwise; then planted faults (a leading dimension off by one, a
// transpose flipped, as a wrong gemm_plan.h would pass them) that must end in a bounds error, a
// status error or a wrong result.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/context.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/runtime.h"
#include "cublasLt.h"
#include "kernels/ref/ref_impl.h"
#include "ops/op_cases.h"
#include "ops/op_staging.h"
#include "tensor/device_runtime.h"
#include "tensor/dtype.h"
#include "vgpu/cuda_sim.h"

namespace ft::test {
namespace {

// ---- the emulated API against ft::ref ----------------------------------------------------------

size_t bytes_of(cudaDataType_t t) {
  return t == CUDA_R_32F ? 4 : 2;
}

// A column-major matrix in a registered allocation of exactly ld · cols elements; the rows between
// `rows` and `ld` hold NaN.
struct Mat {
  cudaDataType_t type;
  int64_t rows, cols, ld;
  vgpu::DeviceMemory mem;
  Mat(cudaDataType_t t, int64_t r, int64_t c, int64_t l, const char* what)
      : type(t), rows(r), cols(c), ld(l), mem(static_cast<size_t>(std::max<int64_t>(l * c, 1)) * bytes_of(t), what) {
    for (int64_t i = 0; i < ld * cols; ++i) put(i, NAN);
  }
  void put(int64_t i, float v) {
    if (type == CUDA_R_32F) {
      static_cast<float*>(mem.get())[i] = v;
    } else {
      const uint16_t h = type == CUDA_R_16BF ? f32_to_bf16(v) : f32_to_f16(v);
      static_cast<uint16_t*>(mem.get())[i] = h;
    }
  }
  double at(int64_t r, int64_t c) const {
    const int64_t i = r + c * ld;
    if (type == CUDA_R_32F) return static_cast<const float*>(mem.get())[i];
    const uint16_t h = static_cast<const uint16_t*>(mem.get())[i];
    return type == CUDA_R_16BF ? bf16_to_f32(h) : f16_to_f32(h);
  }
  void fill(uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t r = 0; r < rows; ++r) put(r + c * ld, u(rng));
  }
  std::vector<char> bits() const {
    const char* p = static_cast<const char*>(mem.get());
    return {p, p + mem.bytes()};
  }
};

struct Layouts {
  cublasLtMatrixLayout_t l[4] = {};
  ~Layouts() {
    for (auto* x : l)
      if (x) cublasLtMatrixLayoutDestroy(x);
  }
};

struct Lt {
  cublasLtHandle_t h = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  Lt(bool ta, bool tb) {
    EXPECT_EQ(cublasLtCreate(&h), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
    const int32_t a = ta ? CUBLAS_OP_T : CUBLAS_OP_N, b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &a, sizeof a), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &b, sizeof b), CUBLAS_STATUS_SUCCESS);
  }
  ~Lt() {
    cublasLtMatmulDescDestroy(op);
    cublasLtDestroy(h);
  }
  // Heuristic (default preference but 16-byte alignments) then the matmul; the first bad status.
  cublasStatus_t run(const Mat& A, const Mat& B, const Mat* C, Mat& D, float alpha, float beta) {
    Layouts L;
    const Mat* m[4] = {&A, &B, C ? C : &D, &D};
    for (int i = 0; i < 4; ++i)
      cublasLtMatrixLayoutCreate(&L.l[i], m[i]->type, static_cast<uint64_t>(m[i]->rows),
                                 static_cast<uint64_t>(m[i]->cols), m[i]->ld);
    cublasLtMatmulPreference_t pref = nullptr;
    cublasLtMatmulPreferenceCreate(&pref);
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
      const uint32_t sixteen = 16;
      cublasLtMatmulPreferenceSetAttribute(pref, attr, &sixteen, sizeof sixteen);
    }
    cublasLtMatmulHeuristicResult_t r{};
    int found = 0;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(h, op, L.l[0], L.l[1], L.l[2], L.l[3], pref, 1, &r, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    EXPECT_EQ(found, 1);
    EXPECT_EQ(r.state, CUBLAS_STATUS_SUCCESS);
    return cublasLtMatmul(h, op, &alpha, A.mem.get(), L.l[0], B.mem.get(), L.l[1], &beta,
                          C ? C->mem.get() : D.mem.get(), L.l[2], D.mem.get(), L.l[3], &r.algo, nullptr, 0, nullptr);
  }
};

struct Types {
  cudaDataType_t ab, cd;
};
const Types kTypes[] = {{CUDA_R_32F, CUDA_R_32F},
                        {CUDA_R_16BF, CUDA_R_32F},
                        {CUDA_R_16BF, CUDA_R_16BF},
                        {CUDA_R_16F, CUDA_R_32F},
                        {CUDA_R_16F, CUDA_R_16F}};

// D(m, n) = alpha op(A) op(B) + beta C against ft::ref on the same (rounded) operands, within the
// K-term dot product's error bound plus one rounding into D's type; D's gap rows untouched.
void check_gemm(int64_t m, int64_t n, int64_t k, bool ta, bool tb, Types t, int64_t pad, float alpha, float beta,
                bool separate_c) {
  SCOPED_TRACE("m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
               " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) + " ab=" + std::to_string(t.ab) +
               " cd=" + std::to_string(t.cd) + " pad=" + std::to_string(pad) + " alpha=" + std::to_string(alpha) +
               " beta=" + std::to_string(beta) + " C!=D=" + std::to_string(separate_c));
  Mat A(t.ab, ta ? k : m, ta ? m : k, (ta ? k : m) + pad, "A");
  Mat B(t.ab, tb ? n : k, tb ? k : n, (tb ? n : k) + pad, "B");
  Mat C(t.cd, m, n, m + 2 * pad, "C"), D(t.cd, m, n, m + pad, "D");
  A.fill(1 + m), B.fill(2 + n), C.fill(3 + k), D.fill(4);
  Mat& c_in = separate_c ? C : D;
  // op(A) (m, k) and op(B) (k, n) row-major, as the GEMM multiplies them, for ft::ref.
  std::vector<double> X(static_cast<size_t>(m * k)), Y(static_cast<size_t>(k * n)), absX, absY;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) X[static_cast<size_t>(i * k + p)] = ta ? A.at(p, i) : A.at(i, p);
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) Y[static_cast<size_t>(p * n + j)] = tb ? B.at(j, p) : B.at(p, j);
  for (double x : X) absX.push_back(std::fabs(x));
  for (double y : Y) absY.push_back(std::fabs(y));
  std::vector<double> want(static_cast<size_t>(m * n)), bound(want.size());
  ref_impl::matmul(want.data(), X.data(), Y.data(), m, n, k, false, false, 0.0);
  ref_impl::matmul(bound.data(), absX.data(), absY.data(), m, n, k, false, false, 0.0);
  std::vector<double> c0(want.size());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) c0[static_cast<size_t>(i * n + j)] = c_in.at(i, j);
  const std::vector<char> d_before = D.bits();

  Lt lt(ta, tb);
  ASSERT_EQ(lt.run(A, B, separate_c ? &C : nullptr, D, alpha, beta), CUBLAS_STATUS_SUCCESS);
  const std::vector<char> d_once = D.bits();
  const double out_rel = t.cd == CUDA_R_16BF ? 0x1p-8 : t.cd == CUDA_R_16F ? 0x1p-11 : 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const size_t e = static_cast<size_t>(i * n + j);
      const double w = alpha * want[e] + (beta != 0 ? beta * c0[e] : 0.0);
      const double allowed =
          2.0 * static_cast<double>(k + 2) * 0x1p-24 * (std::fabs(alpha) * bound[e] + std::fabs(beta * c0[e])) +
          out_rel * std::fabs(w) + 0x1p-24;
      ASSERT_LE(std::fabs(D.at(i, j) - w), allowed) << "D[" << i << ", " << j << "] = " << D.at(i, j) << ", want " << w;
    }
  // The gap rows of D are D's bytes as before (NaN): the GEMM wrote only its m rows.
  const size_t eb = bytes_of(t.cd);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t r = m; r < D.ld; ++r) {
      const size_t off = static_cast<size_t>(r + j * D.ld) * eb;
      ASSERT_EQ(std::memcmp(d_once.data() + off, d_before.data() + off, eb), 0) << "gap row " << r << " written";
    }
  // Twice from the same inputs, the same bits (D = C's copy was overwritten: only when C ≠ D).
  if (separate_c || beta == 0) {
    ASSERT_EQ(lt.run(A, B, separate_c ? &C : nullptr, D, alpha, beta), CUBLAS_STATUS_SUCCESS);
    EXPECT_TRUE(D.bits() == d_once) << "two runs differ";
  }
}

TEST(VgpuCublasLt, EveryTransposeTypeAndLeadingDimensionMatchesReference) {
  struct Size {
    int64_t m, n, k;
  };
  for (Size s : {Size{1, 1, 1}, Size{5, 3, 7}, Size{17, 33, 9}, Size{64, 2, 130}})
    for (int t = 0; t < 4; ++t)
      for (Types types : kTypes)
        for (int64_t pad : {0, 3}) check_gemm(s.m, s.n, s.k, t & 1, t >> 1, types, pad, 1.0f, 0.0f, false);
}

TEST(VgpuCublasLt, AlphaBetaAndSeparateC) {
  for (int t = 0; t < 4; ++t)
    for (Types types : kTypes)
      for (auto [alpha, beta] : {std::pair{1.0f, 1.0f}, std::pair{0.5f, -2.0f}, std::pair{-1.5f, 0.0f}})
        for (bool separate : {false, true}) check_gemm(13, 6, 11, t & 1, t >> 1, types, 2, alpha, beta, separate);
}

TEST(VgpuCublasLt, BetaZeroNeverReadsC) {
  // C all NaN (and D's own bytes NaN): with beta = 0 the result is finite.
  Mat A(CUDA_R_32F, 4, 3, 4, "A"), B(CUDA_R_32F, 3, 2, 3, "B"), C(CUDA_R_32F, 4, 2, 4, "C"),
      D(CUDA_R_32F, 4, 2, 4, "D");
  A.fill(1), B.fill(2);
  Lt lt(false, false);
  ASSERT_EQ(lt.run(A, B, &C, D, 1.0f, 0.0f), CUBLAS_STATUS_SUCCESS);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 2; ++j) EXPECT_TRUE(std::isfinite(D.at(i, j)));
}

// The documented status codes.
TEST(VgpuCublasLt, StatusCodes) {
  Mat A(CUDA_R_32F, 4, 3, 4, "A"), B(CUDA_R_32F, 3, 2, 3, "B"), D(CUDA_R_32F, 4, 2, 4, "D");
  Mat A16(CUDA_R_16BF, 4, 3, 4, "A16"), B16(CUDA_R_16F, 3, 2, 3, "B16"), D16(CUDA_R_16BF, 4, 2, 4, "D16");
  A.fill(1), B.fill(2), A16.fill(3), B16.fill(4);
  Lt lt(false, false);
  EXPECT_EQ(lt.run(A, B, nullptr, D, 1, 0), CUBLAS_STATUS_SUCCESS);
  Mat Bk(CUDA_R_32F, 4, 2, 4, "Bk");  // k 3 vs 4
  EXPECT_EQ(lt.run(A, Bk, nullptr, D, 1, 0), CUBLAS_STATUS_INVALID_VALUE);
  Mat Dn(CUDA_R_32F, 4, 3, 4, "Dn");  // n 2 vs 3
  EXPECT_EQ(lt.run(A, B, nullptr, Dn, 1, 0), CUBLAS_STATUS_INVALID_VALUE);
  Mat Ald(CUDA_R_32F, 4, 3, 4, "Ald");
  Ald.ld = 3;  // below the rows
  EXPECT_EQ(lt.run(Ald, B, nullptr, D, 1, 0), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(lt.run(A16, B16, nullptr, D, 1, 0), CUBLAS_STATUS_NOT_SUPPORTED);  // A 16BF, B 16F
  EXPECT_EQ(lt.run(A, B, nullptr, D16, 1, 0), CUBLAS_STATUS_NOT_SUPPORTED);    // fp32 in, bf16 out

  const uint32_t bias = CUBLASLT_EPILOGUE_BIAS;
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(lt.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &bias, sizeof bias),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(lt.run(A, B, nullptr, D, 1, 0), CUBLAS_STATUS_NOT_SUPPORTED);  // not modelled: refused
  const uint32_t plain = CUBLASLT_EPILOGUE_DEFAULT;
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(lt.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &plain, sizeof plain),
            CUBLAS_STATUS_SUCCESS);
  const int64_t wrong_size = CUBLAS_OP_T;  // the attribute is an int32_t
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(lt.op, CUBLASLT_MATMUL_DESC_TRANSA, &wrong_size, sizeof wrong_size),
            CUBLAS_STATUS_INVALID_VALUE);
  int32_t read = -1;
  size_t written = 0;
  EXPECT_EQ(cublasLtMatmulDescGetAttribute(lt.op, CUBLASLT_MATMUL_DESC_TRANSA, &read, sizeof read, &written),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(read, CUBLAS_OP_N);
  EXPECT_EQ(written, sizeof read);

  cublasLtMatmulDesc_t tf32 = nullptr;
  cublasLtMatmulDescCreate(&tf32, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F);
  std::swap(tf32, lt.op);
  EXPECT_EQ(lt.run(A, B, nullptr, D, 1, 0), CUBLAS_STATUS_NOT_SUPPORTED);
  std::swap(tf32, lt.op);
  cublasLtMatmulDescDestroy(tf32);

  // The heuristic: at least one result asked for; an fp32 operand below 4-byte alignment has none.
  Layouts L;
  cublasLtMatrixLayoutCreate(&L.l[0], CUDA_R_32F, 4, 3, 4);
  cublasLtMatrixLayoutCreate(&L.l[1], CUDA_R_32F, 3, 2, 3);
  cublasLtMatrixLayoutCreate(&L.l[2], CUDA_R_32F, 4, 2, 4);
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulHeuristicResult_t r{};
  int found = -1;
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(lt.h, lt.op, L.l[0], L.l[1], L.l[2], L.l[2], pref, 0, &r, &found),
            CUBLAS_STATUS_INVALID_VALUE);
  const uint32_t two = 2;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &two, sizeof two);
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(lt.h, lt.op, L.l[0], L.l[1], L.l[2], L.l[2], pref, 1, &r, &found),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(found, 0);
  cublasLtMatmulPreferenceDestroy(pref);

  // In place needs C's layout to be D's; a null or destroyed handle is not initialised.
  cublasLtMatrixLayout_t wide = nullptr;
  cublasLtMatrixLayoutCreate(&wide, CUDA_R_32F, 4, 2, 5);
  const float one = 1, zero = 0;
  EXPECT_EQ(cublasLtMatmul(lt.h, lt.op, &one, A.mem.get(), L.l[0], B.mem.get(), L.l[1], &zero, D.mem.get(), wide,
                           D.mem.get(), L.l[2], nullptr, nullptr, 0, nullptr),
            CUBLAS_STATUS_INVALID_VALUE);
  cublasLtMatrixLayoutDestroy(wide);
  EXPECT_EQ(cublasLtMatmul(nullptr, lt.op, &one, A.mem.get(), L.l[0], B.mem.get(), L.l[1], &zero, D.mem.get(), L.l[2],
                           D.mem.get(), L.l[2], nullptr, nullptr, 0, nullptr),
            CUBLAS_STATUS_NOT_INITIALIZED);
  cublasLtHandle_t gone = nullptr;
  cublasLtCreate(&gone);
  cublasLtDestroy(gone);
  EXPECT_EQ(cublasLtDestroy(gone), CUBLAS_STATUS_NOT_INITIALIZED);
}

// An operand whose leading dimension runs past its buffer: a bounds error naming the GEMM.
TEST(VgpuCublasLt, LeadingDimensionPastTheBufferIsABoundsError) {
  Mat A(CUDA_R_16BF, 6, 5, 6, "A"), B(CUDA_R_16BF, 5, 3, 5, "B"), D(CUDA_R_32F, 6, 3, 6, "D");
  A.fill(1), B.fill(2);
  A.ld = 7;  // the allocation holds 6 x 5
  Lt lt(false, false);
  try {
    lt.run(A, B, nullptr, D, 1, 0);
    FAIL() << "no error";
  } catch (const vgpu::Error& e) {
    EXPECT_NE(std::string(e.what()).find("outside every device allocation"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("past the end of A"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("kernel cublasLtMatmul(m=6 n=3 k=5, A 16BF 6x5 ld 7"), std::string::npos)
        << e.what();
  }
}

// An algorithm chosen for 16-byte aligned operands, run on a pointer aligned to 4: a fault.
TEST(VgpuCublasLt, MisalignedOperandForTheChosenAlgorithmFaults) {
  Mat A(CUDA_R_32F, 4, 4, 4, "A"), B(CUDA_R_32F, 4, 4, 4, "B"), D(CUDA_R_32F, 4, 4, 4, "D");
  Lt lt(false, false);
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatrixLayoutCreate(&a, CUDA_R_32F, 3, 4, 4);
  cublasLtMatrixLayoutCreate(&b, CUDA_R_32F, 4, 3, 4);
  cublasLtMatrixLayoutCreate(&d, CUDA_R_32F, 3, 3, 4);
  cublasLtMatmulHeuristicResult_t r{};
  int found = 0;
  ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(lt.h, lt.op, a, b, d, d, pref, 1, &r, &found), CUBLAS_STATUS_SUCCESS);
  const float one = 1, zero = 0;
  const char* A1 = static_cast<const char*>(A.mem.get()) + 4;  // aligned to 4, inside the buffer
  EXPECT_THROW(cublasLtMatmul(lt.h, lt.op, &one, A1, a, B.mem.get(), b, &zero, D.mem.get(), d, D.mem.get(), d, &r.algo,
                              nullptr, 0, nullptr),
               vgpu::Error);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(a);
  cublasLtMatrixLayoutDestroy(b);
  cublasLtMatrixLayoutDestroy(d);
}

// ---- gemm.cpp's ops through the emulated cuBLASLt ------------------------------------------------

// The rank's compute context of the plugin on the virtual GPU.
const ExecContext& device() {
  static const ExecContext ctx = [] {
    cuda::register_cuda_backend();
    return make_exec_context(Device::kCUDA, 0);
  }();
  return ctx;
}

void run_on_vgpu(const OpCase& row, Case& c) {
  run_case(row, cuda::op_table(), device(), c);
  synchronize(device());
}

// The virtual runtime's streams are threads: a death test re-runs the binary rather than fork it.
const bool kThreadsafeDeathTests = [] {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  return true;
}();

struct Param {
  OpId id;
  size_t shape;
};
void PrintTo(const Param& p, std::ostream* os) {
  *os << op_name(p.id) << " shape " << p.shape;
}

// vgpu_plugin_test runs the first shape of each row and every shape up to its 96 KiB of buffers
// (kMaxCaseBytes there); here the others: up to 2^20 multiply-adds, and above (matmul's
// 67 x 257 x 129, half a second each here) only the shape with both operands transposed and beta 1,
// once per precision.
std::vector<Param> gemm_shapes() {
  constexpr size_t kPluginTestBytes = 96 << 10;
  std::vector<Param> out;
  for (OpId id : {OpId::matmul, OpId::matmul_bf16, OpId::matmul_bf16_add, OpId::matmul_bf16_rounded}) {
    const std::vector<Shape> shapes = op_case(id).test_shapes();
    for (size_t i = 1; i < shapes.size(); ++i) {
      const Shape& s = shapes[i];
      const Case c = op_case(id).make(s, 1);
      size_t bytes = 0;
      for (const Buffer& b : c.buffers()) bytes += b.data.size();
      if (bytes <= kPluginTestBytes) continue;
      const bool all_flags = s["trans_a"] && s["trans_b"] && s["beta"];
      if (s["M"] * s["N"] * s["K"] <= (int64_t{1} << 20) || all_flags) out.push_back({id, i});
    }
  }
  return out;
}

class VgpuGemmOps : public ::testing::TestWithParam<Param> {};

TEST_P(VgpuGemmOps, MatchReferenceTwiceBitwise) {
  const OpCase& row = op_case(GetParam().id);
  const Shape s = row.test_shapes()[GetParam().shape];
  SCOPED_TRACE(std::string(op_name(GetParam().id)) + ": " + s.str());
  const Case before = row.make(s, 1);
  Case want = before, got = before, again = before;
  row.run(ref::op_table(), cpu_context(), want);
  run_on_vgpu(row, got);
  run_on_vgpu(row, again);
  EXPECT_EQ(row.compare(before, got, want), "");
  for (const Buffer& b : got.buffers()) {
    if (!b.is_output()) continue;
    EXPECT_TRUE(b.data == again.buffer(b.name).data) << b.name << ": two runs differ";
  }
}

INSTANTIATE_TEST_SUITE_P(Rows, VgpuGemmOps, ::testing::ValuesIn(gemm_shapes()),
                         [](const ::testing::TestParamInfo<Param>& p) {
                           return std::string(op_name(p.param.id)) + "_" + std::to_string(p.param.shape);
                         });

// K = 0 (no harness row has it): gemm.cpp's own path, D = beta · C without cuBLASLt.
TEST(VgpuGemmOps, EmptyInnerDimensionIsBetaC) {
  cuda::CudaContext& cuda = cuda::context_of(device(), "EmptyInnerDimensionIsBetaC");
  vgpu::DeviceMemory c(6 * 4, "C"), d(6 * 4, "D"), r(6 * 4, "R"), a(16, "A"), b(16, "B");
  auto* C = static_cast<float*>(c.get());
  auto* D = static_cast<float*>(d.get());
  auto* R = static_cast<float*>(r.get());
  for (int i = 0; i < 6; ++i) C[i] = R[i] = static_cast<float>(i + 1);
  cuda::matmul(cuda, C, static_cast<const float*>(a.get()), static_cast<const float*>(b.get()), 2, 3, 0, false, true,
               1.0f, Precision::kF32);
  cuda.synchronize();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(C[i], static_cast<float>(i + 1));
  cuda::matmul_bf16_add(cuda, D, R, static_cast<const uint16_t*>(a.get()), static_cast<const uint16_t*>(b.get()), 2, 3,
                        0, true, false);
  cuda.synchronize();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(D[i], R[i]);
  cuda::matmul(cuda, C, static_cast<const float*>(a.get()), static_cast<const float*>(b.get()), 2, 3, 0, false, false,
               0.0f, Precision::kBF16);
  cuda.synchronize();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(C[i], 0.0f);
}

// ---- planted faults: each must be caught ---------------------------------------------------------

// The row through gemm.cpp with the emulator's fault set; dies with the error or the difference.
void run_with_fault(OpId id, const Shape& s, const char* fault, int value) {
  vgpu::set_fault(fault, value);
  const OpCase& row = op_case(id);
  const Case before = row.make(s, 1);
  Case want = before, got = before;
  row.run(ref::op_table(), cpu_context(), want);
  try {
    run_on_vgpu(row, got);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vgpu error: %s\n%s\n", e.what(), vgpu::fault_report());
    std::abort();
  }
  const std::string diff = row.compare(before, got, want);
  if (!diff.empty()) {
    std::fprintf(stderr, "wrong result: %s\n", diff.c_str());
    std::abort();
  }
}

// Square, so that a flipped transpose still has consistent shapes.
const Shape kSquare{{"M", 9}, {"N", 9}, {"K", 9}, {"trans_a", 0}, {"trans_b", 1}, {"beta", 0}, {"prec", 1}};

TEST(VgpuGemmFaults, CleanRunPasses) {
  run_with_fault(OpId::matmul_bf16, kSquare, "cublaslt_lda", 0);
}

TEST(VgpuGemmFaultsDeathTest, LeadingDimensionOneTooLargeIsABoundsError) {
  // cuBLASLt's A is our B (gemm_plan.h): B(9, 9) read with ld 10 runs past its allocation.
  EXPECT_DEATH(run_with_fault(OpId::matmul_bf16, kSquare, "cublaslt_lda", 1),
               "vgpu error: (.|\n)*global read .* outside every device allocation .*past the end of pool allocation.* "
               "kernel cublasLtMatmul\\(m=9 n=9 k=9");
}

TEST(VgpuGemmFaultsDeathTest, LeadingDimensionOneTooSmallIsRefused) {
  EXPECT_DEATH(run_with_fault(OpId::matmul_bf16, kSquare, "cublaslt_lda", -1),
               "vgpu error: .*matmul_bf16.*CUBLAS_STATUS_INVALID_VALUE");
}

TEST(VgpuGemmFaultsDeathTest, TransposeFlippedGivesAWrongResult) {
  EXPECT_DEATH(run_with_fault(OpId::matmul_bf16, kSquare, "cublaslt_transa_flip", 1), "wrong result: C\\[");
}

}  // namespace
}  // namespace ft::test

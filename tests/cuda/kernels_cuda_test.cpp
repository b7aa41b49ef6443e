// The CUDA backend on a GPU. Every row of the op harness (tests/ops: every op of op_decls.inc on
// its odd shapes — tails that are not a multiple of a warp or a block, vocab shards, GQA) runs
// through the CUDA OpTable against the scalar reference (ft::ref) with the row's tolerance, twice
// from the same inputs for the same bits (no atomics, fixed reduction orders), and the backward
// rows against float64 finite differences; the case's buffers are staged through device memory
// (tests/ops/op_staging.h), outputs starting as NaN so an element an op forgets fails. Then what
// the harness does not cover: the DeviceMemory (copies, strided copies, fills, the tracker, out
// of memory), the DeviceRuntime (side streams ordered by stream_wait), the bf16/fp16 attention
// through cuDNN SDPA, errors naming the op, FT_CUDA_SYNC_CHECK naming a faulting op (a death test:
// its own process), and (disabled, run by scripts/gpu_check.sh) the GEMM rate.
//
// Without a usable GPU every test is skipped with the reason (CTest reports them skipped). On a GPU
// machine scripts/gpu_check.sh runs this binary (stage 1).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cuda/context.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/runtime.h"
#include "kernels/ops.h"
#include "ops/op_cases.h"
#include "ops/op_checks.h"
#include "tensor/device_runtime.h"
#include "tensor/dtype.h"
#include "tensor/memory.h"
#include "util/error.h"

namespace ft::cuda {
namespace {

// ---- the device and its buffers -------------------------------------------------------------

ExecContext* g_ctx = nullptr;
std::string g_no_gpu;

void open_device() {
  static bool done = false;
  if (done) return;
  done = true;
  register_cuda_backend();
  g_no_gpu = device_unavailable_reason(Device::kCUDA);
  if (g_no_gpu.empty()) g_ctx = new ExecContext(make_exec_context(Device::kCUDA, 0));
}

class CudaTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { open_device(); }
  void SetUp() override {
    if (!g_ctx) GTEST_SKIP() << "no usable GPU: " << g_no_gpu;
  }
  const ExecContext& ectx() { return *g_ctx; }
  CudaContext& ctx() { return *static_cast<CudaContext*>(g_ctx->backend); }
};

std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// A device array from mem_alloc: created NaN-filled (all bits set); uploads and downloads on the
// test context's stream (a download synchronises: mem_copy to the host does).
template <typename T>
class Dev {
 public:
  explicit Dev(size_t n) : n_(n) {
    if (n_) p_ = static_cast<T*>(mem_alloc(Device::kCUDA, bytes(), MemCategory::kOther));
    poison();
  }
  explicit Dev(const std::vector<T>& v) : Dev(v.size()) { upload(v); }
  ~Dev() { mem_free(Device::kCUDA, p_, bytes(), MemCategory::kOther); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  T* get() const { return p_; }
  operator T*() const { return p_; }
  void upload(const std::vector<T>& v) { mem_copy(*g_ctx, p_, Device::kCUDA, v.data(), Device::kCPU, bytes()); }
  void poison() { mem_fill(*g_ctx, p_, Device::kCUDA, 0xff, bytes()); }
  std::vector<T> download() const {
    std::vector<T> v(n_);
    mem_copy(*g_ctx, v.data(), Device::kCPU, p_, Device::kCUDA, bytes());
    return v;
  }

 private:
  size_t bytes() const { return n_ * sizeof(T); }
  size_t n_;
  T* p_ = nullptr;
};

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}
template <typename... T>
bool same_bits(const std::tuple<T...>& a, const std::tuple<T...>& b) {
  return std::apply(
      [&](const auto&... x) { return std::apply([&](const auto&... y) { return (same_bits(x, y) && ...); }, b); }, a);
}

// Runs f twice and checks the two results are bit-identical; returns the first.
template <typename F>
auto twice(F f) {
  auto first = f();
  auto second = f();
  EXPECT_TRUE(same_bits(first, second)) << "a second run gave other bits";
  return first;
}

// ‖got − want‖ / ‖want‖
template <typename G, typename W>
double rel_err(const std::vector<G>& got, const std::vector<W>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = static_cast<double>(got[i]) - static_cast<double>(want[i]);
    num += d * d;
    den += static_cast<double>(want[i]) * static_cast<double>(want[i]);
  }
  return std::isnan(num) ? INFINITY : std::sqrt(num / (den > 0 ? den : 1.0));
}

std::vector<float> widen_bf16(const std::vector<uint16_t>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = ::ft::bf16_to_f32(v[i]);
  return out;
}
std::vector<float> widen_f16(const std::vector<uint16_t>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = ::ft::f16_to_f32(v[i]);
  return out;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(std::string(what) + ": " + cudaGetErrorString(e));
}

struct AttnShape {
  int64_t B, T, H, Hkv, D;
  int64_t qkv() const { return B * T * (H + 2 * Hkv) * D; }
  int64_t out() const { return B * T * H * D; }
  int64_t lse() const { return B * H * T; }
};
std::ostream& operator<<(std::ostream& os, const AttnShape& s) {
  return os << "B " << s.B << " T " << s.T << " H " << s.H << " Hkv " << s.Hkv << " D " << s.D;
}

// ---- every op of the harness ------------------------------------------------------------------

class CudaOpRow : public CudaTest, public ::testing::WithParamInterface<size_t> {};

TEST_P(CudaOpRow, MatchesTheReferenceTwiceBitwiseAndItsGradients) {
  const test::OpRow& r = test::op_rows()[GetParam()];
  const test::OpCase& row = r.row();
  for (const test::Shape& s : row.test_shapes()) {
    SCOPED_TRACE(s.str());
    EXPECT_EQ(test::check_against_reference(row, s, op_table(), ectx()), "");
    EXPECT_EQ(test::check_repeatable(row, s, op_table(), ectx()), "");
  }
  for (const test::Shape& s : row.grad_shapes()) {
    SCOPED_TRACE("gradients " + s.str());
    EXPECT_EQ(test::check_gradients(row, s, op_table(), ectx()), "");
  }
}

INSTANTIATE_TEST_SUITE_P(EveryOp, CudaOpRow, ::testing::Range<size_t>(0, kOpCount),
                         [](const ::testing::TestParamInfo<size_t>& i) {
                           return std::string(op_name(static_cast<OpId>(i.param)));
                         });

// ---- memory and streams -------------------------------------------------------------------

TEST_F(CudaTest, MemoryCopiesFillsAndTheTracker) {
  const int64_t live0 = MemoryTracker::global().live(MemCategory::kActivations, Device::kCUDA);
  const size_t n = 1000003;
  auto* p = static_cast<float*>(mem_alloc(Device::kCUDA, n * sizeof(float), MemCategory::kActivations));
  EXPECT_EQ(MemoryTracker::global().live(MemCategory::kActivations, Device::kCUDA) - live0,
            static_cast<int64_t>(n * sizeof(float)));
  const auto x = random_floats(n, 5);
  mem_copy(ectx(), p, Device::kCUDA, x.data(), Device::kCPU, n * sizeof(float));
  std::vector<float> back(n);
  mem_copy(ectx(), back.data(), Device::kCPU, p, Device::kCUDA, n * sizeof(float));
  EXPECT_TRUE(same_bits(back, x));
  // A column block: 3 of every 7 floats of 1000 rows.
  const size_t rows = 1000;
  std::vector<float> cols(rows * 3);
  mem_copy_2d(ectx(), cols.data(), Device::kCPU, 3 * sizeof(float), p + 2, Device::kCUDA, 7 * sizeof(float),
              3 * sizeof(float), rows);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < 3; ++c) ASSERT_EQ(cols[r * 3 + c], x[r * 7 + 2 + c]) << r << " " << c;
  mem_zero(ectx(), p, Device::kCUDA, n * sizeof(float));
  mem_copy(ectx(), back.data(), Device::kCPU, p, Device::kCUDA, n * sizeof(float));
  EXPECT_TRUE(std::all_of(back.begin(), back.end(), [](float v) { return v == 0.0f; }));
  mem_free(Device::kCUDA, p, n * sizeof(float), MemCategory::kActivations);
  EXPECT_EQ(MemoryTracker::global().live(MemCategory::kActivations, Device::kCUDA), live0);
  // Pinned host memory for asynchronous copies.
  void* h = mem_alloc_host(Device::kCUDA, 4096, MemCategory::kCheckpoint);
  ASSERT_NE(h, nullptr);
  mem_free_host(Device::kCUDA, h, 4096, MemCategory::kCheckpoint);
}

TEST_F(CudaTest, OutOfMemoryNamesTheCategoryTheRequestAndWhatHoldsMemory) {
  try {
    mem_alloc(Device::kCUDA, size_t{1} << 50, MemCategory::kActivations);  // 1 PiB
    FAIL() << "1 PiB of device memory";
  } catch (const Error& e) {
    const std::string what = e.what();
    std::cout << "error: " << what << "\n";
    EXPECT_NE(what.find("out of memory allocating 1.0 PiB for activations on cuda"), std::string::npos) << what;
    EXPECT_NE(what.find("live on cuda"), std::string::npos) << what;
  }
  // The device is still usable.
  Dev<float> x(std::vector<float>{1.0f, 2.0f});
  EXPECT_EQ(x.download()[1], 2.0f);
}

TEST_F(CudaTest, SideStreamWaitsForTheMainStream) {
  const size_t n = size_t{1} << 24;
  Dev<float> x(std::vector<float>(n, 1.0f));
  ExecContext side = make_side_context(ectx());
  EXPECT_NE(side.stream, ectx().stream);
  EXPECT_EQ(static_cast<cuda::CudaContext*>(side.backend)->cublaslt(),
            static_cast<cuda::CudaContext*>(ectx().backend)->cublaslt());  // the cuBLASLt handle is shared
  for (int i = 0; i < 20; ++i) ops::add_inplace(ectx(), x, x, static_cast<int64_t>(n));  // x *= 2: queued, not waited
  stream_wait(side, ectx());
  std::vector<float> back(n);
  mem_copy(side, back.data(), Device::kCPU, x.get(), Device::kCUDA, n * sizeof(float));
  const float want = std::pow(2.0f, 20.0f);
  EXPECT_EQ(back.front(), want);
  EXPECT_EQ(back.back(), want);
  synchronize(side);
  synchronize(ectx());
}

TEST_F(CudaTest, SumsStayOnTheDeviceUntilOneReadBack) {
  const auto x = random_floats(100003, 7, -3.0f, 3.0f);
  Dev<float> dx(x);
  Dev<double> sums(std::vector<double>{0.25, 0.5});
  ops::sum_squares(ectx(), sums.get(), dx, static_cast<int64_t>(x.size()));
  ops::sum_in_order(ectx(), sums.get() + 1, dx, static_cast<int64_t>(x.size()));
  double sq = 0.25, in_order = 0.5;
  for (float v : x) sq += static_cast<double>(v) * v;
  for (float v : x) in_order += static_cast<double>(v);
  const auto got = sums.download();
  EXPECT_NEAR(got[0], sq, 1e-12 * sq);
  EXPECT_EQ(got[1], in_order);  // the host loop's order: the same bits
}

// ---- attention in bf16 / fp16 (cuDNN SDPA, or the fp32 fallback) ---------------------------

// First guesses, never yet checked on a GPU: cuDNN rounds P to the I/O type before P·V.
constexpr double kLowpOutBf16 = 1.5e-2, kLowpOutF16 = 3e-3, kLowpLse = 1e-4, kLowpGradBf16 = 3e-2, kLowpGradF16 = 6e-3;

TEST_F(CudaTest, AttentionLowPrecisionMatchesReference) {
  std::cout << "cuDNN SDPA: " << (have_cudnn_sdpa() ? "yes" : cudnn_sdpa_missing_reason()) << "\n";
#if FT_HAVE_CUDNN
  // A build with cuDNN SDPA checks it: its sub-plugin (libfluxtrain_cudnn.so) must load here.
  EXPECT_TRUE(have_cudnn_sdpa()) << cudnn_sdpa_missing_reason();
#endif
  for (LowPrecision type : {LowPrecision::kBF16, LowPrecision::kF16}) {
    const bool bf16 = type == LowPrecision::kBF16;
    for (const AttnShape& s : {AttnShape{2, 67, 4, 2, 16}, AttnShape{1, 130, 3, 3, 64}, AttnShape{1, 100, 4, 1, 128},
                               AttnShape{2, 129, 2, 2, 24}, AttnShape{1, 45, 2, 1, 6}, AttnShape{2, 256, 6, 6, 64}}) {
      SCOPED_TRACE(testing::Message() << s << (bf16 ? " bf16" : " fp16"));
      auto round = [&](const std::vector<float>& v) {
        std::vector<uint16_t> r(v.size());
        for (size_t i = 0; i < v.size(); ++i) r[i] = bf16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
        return r;
      };
      auto widen = [&](const std::vector<uint16_t>& v) { return bf16 ? widen_bf16(v) : widen_f16(v); };
      const auto qkv16 = round(random_floats(s.qkv(), 51 + s.T, -2.0f, 2.0f));
      const auto dout16 = round(random_floats(s.out(), 52 + s.T));
      const auto qkv = widen(qkv16), dout = widen(dout16);
      std::vector<float> out_ref(s.out()), lse_ref(s.lse()), dqkv_ref(s.qkv());
      ref::attention_forward(cpu_context(), out_ref.data(), lse_ref.data(), qkv.data(), s.B, s.T, s.H, s.Hkv, s.D);
      ref::attention_backward(cpu_context(), dqkv_ref.data(), dout.data(), qkv.data(), out_ref.data(), lse_ref.data(),
                              s.B, s.T, s.H, s.Hkv, s.D);
      Dev<uint16_t> dqkv_in(qkv16), ddout(dout16), dout_lp(s.out()), ddqkv(s.qkv());
      Dev<float> dlse(s.lse());
      AttentionPath fwd_path{}, bwd_path{};
      auto [out16, lse] = twice([&] {
        dout_lp.poison();
        dlse.poison();
        fwd_path = attention_forward_lowp(ctx(), dout_lp, dlse, dqkv_in, s.B, s.T, s.H, s.Hkv, s.D, type);
        return std::make_tuple(dout_lp.download(), dlse.download());
      });
      const double e_out = rel_err(widen(out16), out_ref), e_lse = rel_err(lse, lse_ref);
      // The backward from this op's own out and lse, as training would run it.
      auto dqkv16 = twice([&] {
        ddqkv.poison();
        bwd_path =
            attention_backward_lowp(ctx(), ddqkv, ddout, dqkv_in, dout_lp, dlse, s.B, s.T, s.H, s.Hkv, s.D, type);
        return ddqkv.download();
      });
      const double e_grad = rel_err(widen(dqkv16), dqkv_ref);
      std::cout << "  " << s << (bf16 ? " bf16" : " fp16") << ": forward "
                << (fwd_path == AttentionPath::kCudnn ? "cuDNN" : "fp32 fallback") << ", backward "
                << (bwd_path == AttentionPath::kCudnn ? "cuDNN" : "fp32 fallback") << "; rel. error out " << e_out
                << " lse " << e_lse << " dqkv " << e_grad << "\n";
      if (fwd_path != AttentionPath::kCudnn || bwd_path != AttentionPath::kCudnn)
        std::cout << "    " << sdpa_refusal(ctx()) << "\n";
      EXPECT_LT(e_out, bf16 ? kLowpOutBf16 : kLowpOutF16);
      EXPECT_LT(e_lse, kLowpLse);
      EXPECT_LT(e_grad, bf16 ? kLowpGradBf16 : kLowpGradF16);
      // cuDNN needs D a multiple of 8: D = 6 must fall back. 64 and 128 (the presets' large head
      // dims) must run on cuDNN; a refusal of any other head dim (16, 24) is a warning, not a
      // failure: which ones the installed cuDNN takes is its choice (gpu_check.sh parses it).
      if (s.D % 8 != 0) {
        EXPECT_EQ(fwd_path, AttentionPath::kFp32Fallback);
      }
      const bool on_cudnn = fwd_path == AttentionPath::kCudnn && bwd_path == AttentionPath::kCudnn;
      if (have_cudnn_sdpa() && (s.D == 64 || s.D == 128)) {
        EXPECT_EQ(fwd_path, AttentionPath::kCudnn) << sdpa_refusal(ctx());
        EXPECT_EQ(bwd_path, AttentionPath::kCudnn) << sdpa_refusal(ctx());
      } else if (have_cudnn_sdpa() && s.D % 8 == 0 && !on_cudnn) {
        std::cout << "warning: cuDNN SDPA refused head dim " << s.D << " (" << (bf16 ? "bf16" : "fp16")
                  << "; the fp32 fallback ran): " << sdpa_refusal(ctx()) << "\n";
      }
    }
  }
}

// ---- errors -------------------------------------------------------------------------------

TEST_F(CudaTest, BadSizesAreErrorsNamingTheOp) {
  Dev<float> x(16);
  EXPECT_THROW(ops::attention_forward(ectx(), x, x, x, 1, 2, 3, 2, 4), Error);    // H not a multiple of Hkv
  EXPECT_THROW(ops::attention_forward(ectx(), x, x, x, 1, 2, 2, 1, 300), Error);  // D past the kernel's 256
  EXPECT_THROW(ops::matmul(ectx(), x, x, x, 2, 2, 2, false, false, 0.5f, Precision::kF32), Error);  // beta
  try {
    ops::rope_forward(ectx(), x, x, x, 1, 1, 1, 1, 3, 0);
    FAIL() << "odd head dimension accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rope_forward (B=1 T=1 H=1 Hkv=1 D=3 pos0=0)"), std::string::npos) << e.what();
  }
}

// The rate of our cuBLASLt GEMMs at 8192³ (the denominator of a measured MFU): run by
// scripts/gpu_check.sh, which parses the "gemm rate" lines. Random operands (zeros run faster),
// 3 warm-ups, the median of 10 timed products by CUDA events.
TEST_F(CudaTest, DISABLED_GemmRate) {
  const int64_t n = 8192;
  auto a = random_floats(n * n, 91), b = random_floats(n * n, 92);
  std::vector<uint16_t> a16(a.size()), b16(b.size());
  for (size_t i = 0; i < a.size(); ++i) a16[i] = f32_to_bf16(a[i]), b16[i] = f32_to_bf16(b[i]);
  Dev<float> dA(a), dB(b), dC(n * n);
  Dev<uint16_t> dA16(a16), dB16(b16);
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  for (const char* type : {"bf16", "fp32"}) {
    auto once = [&] {
      if (type[0] == 'b')
        matmul_bf16(ctx(), dC, dA16, dB16, n, n, n, false, false, 0.0f);
      else
        matmul(ctx(), dC, dA, dB, n, n, n, false, false, 0.0f, Precision::kF32);
    };
    for (int i = 0; i < 3; ++i) once();
    std::vector<float> ms;
    for (int i = 0; i < 10; ++i) {
      check(cudaEventRecord(start, ctx().stream()), "cudaEventRecord");
      once();
      check(cudaEventRecord(stop, ctx().stream()), "cudaEventRecord");
      check(cudaEventSynchronize(stop), "cudaEventSynchronize");
      float t = 0;
      check(cudaEventElapsedTime(&t, start, stop), "cudaEventElapsedTime");
      ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    const double median = 0.5 * (ms[4] + ms[5]), tflops = 2.0 * n * n * n / (median * 1e-3) / 1e12;
    std::cout << "gemm rate " << type << " " << n << "^3: " << tflops << " TFLOP/s (median " << median << " ms)\n";
    EXPECT_GT(tflops, 0.0);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

// FT_CUDA_SYNC_CHECK names the op that faults, and the device memory freed after the fault (a
// sticky error: every later call fails) is freed without an exception (a throw from the Dev's
// destructor would end in std::terminate) and noted once. A death test: the fault leaves the CUDA
// context unusable, so it runs in a child process of its own (re-executed, "threadsafe": no fork
// after CUDA is initialised) and the rest of this binary is unaffected.
TEST_F(CudaTest, SyncCheckNamesTheFaultingOpAndFreesWithoutThrowing) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ctx().set_sync_check(true);
        auto* bogus = reinterpret_cast<float*>(uintptr_t{0x10});
        std::string what;
        {
          Dev<float> x(1 << 20);
          try {
            ops::add_inplace(ectx(), bogus, x, 1 << 20);
          } catch (const Error& e) {
            what = e.what();
          }
        }  // x freed on a faulted device
        std::cerr << "error: " << what << "\nfree failures noted: " << mem_free_failures()
                  << "\nfirst: " << mem_first_free_failure() << "\n";
        const bool named = what.find("add_inplace (n=1048576)") != std::string::npos &&
                           what.find("FT_CUDA_SYNC_CHECK") != std::string::npos;
        std::_Exit(named && mem_free_failures() >= 1 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "add_inplace \\(n=1048576\\)");
}

}  // namespace
}  // namespace ft::cuda

// The emulated GPU's own guarantees, without which every devemu test could pass vacuously: host
// code that touches its memory dies with SIGSEGV, its ops refuse host pointers, its copies and
// ops do what the CPU's do, and running out of its memory is an error naming the request.
#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <vector>

#include "arena.h"
#include "devemu.h"
#include "kernels/ops.h"
#include "tensor/device_runtime.h"
#include "tensor/memory.h"
#include "tensor/tensor.h"
#include "util/error.h"

namespace ft {
namespace {

class DevemuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");  // OpenMP threads exist
    devemu::register_emulated_gpu();
    ctx_ = make_exec_context(Device::kCUDA, 0);
  }
  ExecContext ctx_;
};

// The kernel's verdict, not a sanitizer's SIGSEGV handler (the ASan build runs these too).
void default_segv() {
  std::signal(SIGSEGV, SIG_DFL);
}

TEST_F(DevemuTest, HostReadOfDeviceMemoryDiesWithSigsegv) {
  EXPECT_EXIT(
      {
        default_segv();
        auto* p = static_cast<volatile float*>(mem_alloc(Device::kCUDA, 256, MemCategory::kOther));
        float v = p[3];  // what a host loop over a device tensor does
        std::printf("read %f\n", static_cast<double>(v));
        std::exit(0);
      },
      ::testing::KilledBySignal(SIGSEGV), "");
}

TEST_F(DevemuTest, HostWriteOfDeviceMemoryDiesWithSigsegv) {
  EXPECT_EXIT(
      {
        default_segv();
        Tensor t = Tensor::zeros({64}, DType::kF32, MemCategory::kOther, Device::kCUDA);
        t.data<float>()[0] = 1.0f;
        std::exit(0);
      },
      ::testing::KilledBySignal(SIGSEGV), "");
}

TEST_F(DevemuTest, ArenaIsClosedAgainAfterACopy) {
  EXPECT_EXIT(
      {
        default_segv();
        const ExecContext ctx = make_exec_context(Device::kCUDA, 0);
        auto* p = static_cast<float*>(mem_alloc(Device::kCUDA, 256, MemCategory::kOther));
        std::vector<float> host(64, 2.0f);
        mem_copy(ctx, p, Device::kCUDA, host.data(), Device::kCPU, 256);  // opens and closes the arena
        volatile float v = p[0];
        std::printf("read %f\n", static_cast<double>(v));
        std::exit(0);
      },
      ::testing::KilledBySignal(SIGSEGV), "");
}

TEST_F(DevemuTest, OpsRefuseHostPointers) {
  EXPECT_DEATH(
      {
        std::vector<float> host(16, 1.0f);
        ops::add_inplace(ctx_, host.data(), host.data(), 16);
      },
      "op add_inplace: argument 0 is not device memory");
}

TEST_F(DevemuTest, OpsRefuseAContextTheRuntimeDidNotMake) {
  EXPECT_DEATH(
      {
        Tensor t = Tensor::zeros({16}, DType::kF32, MemCategory::kOther, Device::kCUDA);
        ExecContext hand_made;  // a device, but no stream the runtime made
        hand_made.device = Device::kCUDA;
        ops::add_inplace(hand_made, t.data<float>(), t.data<float>(), 16);
      },
      "did not make");
}

TEST_F(DevemuTest, CopiesAndOpsMatchTheCpu) {
  const int64_t n = 1000;
  std::vector<float> x(n), y(n);
  for (int64_t i = 0; i < n; ++i) x[i] = 0.001f * static_cast<float>(i * i % 97), y[i] = 1.0f / (1.0f + i);
  Tensor dx = Tensor::empty({n}, DType::kF32, MemCategory::kOther, Device::kCUDA);
  Tensor dy = Tensor::empty({n}, DType::kF32, MemCategory::kOther, Device::kCUDA);
  mem_copy(ctx_, dx.raw(), Device::kCUDA, x.data(), Device::kCPU, n * 4);
  mem_copy(ctx_, dy.raw(), Device::kCUDA, y.data(), Device::kCPU, n * 4);
  ops::add_inplace(ctx_, dy.data<float>(), dx.data<float>(), n);
  Tensor sum = Tensor::zeros({1}, DType::kF64, MemCategory::kOther, Device::kCUDA);
  ops::sum_squares(ctx_, sum.data<double>(), dy.data<float>(), n);
  std::vector<float> back(n);
  mem_copy(ctx_, back.data(), Device::kCPU, dy.raw(), Device::kCUDA, n * 4);
  double s = 0;
  mem_copy(ctx_, &s, Device::kCPU, sum.raw(), Device::kCUDA, sizeof s);

  cpu::add_inplace(cpu_context(), y.data(), x.data(), n);
  double cs = 0;
  cpu::sum_squares(cpu_context(), &cs, y.data(), n);
  EXPECT_EQ(0, std::memcmp(back.data(), y.data(), n * 4));
  EXPECT_EQ(s, cs);
  EXPECT_GT(MemoryTracker::global().total_live(Device::kCUDA), 0);
}

// The fp16 wire's conversions (op_decls.inc's to_fp16 / from_fp16, which the emulator serves from
// the list like every op): device buffers in and out, the CPU's bits, a sum past 65504 still inf.
TEST_F(DevemuTest, Fp16ConversionsRunOnDeviceBuffers) {
  const int64_t n = 1000;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = 70.0f * static_cast<float>(i) * (i % 2 ? -1.0f : 1.0f);
  Tensor dx = Tensor::empty({n}, DType::kF32, MemCategory::kOther, Device::kCUDA);
  Tensor dh = Tensor::empty({n}, DType::kF16, MemCategory::kOther, Device::kCUDA);
  mem_copy(ctx_, dx.raw(), Device::kCUDA, x.data(), Device::kCPU, n * 4);
  ops::to_fp16(ctx_, dh.data<uint16_t>(), dx.data<float>(), n);
  ops::from_fp16(ctx_, dx.data<float>(), dh.data<uint16_t>(), n);
  std::vector<float> back(n);
  mem_copy(ctx_, back.data(), Device::kCPU, dx.raw(), Device::kCUDA, n * 4);
  std::vector<uint16_t> h(n);
  cpu::to_fp16(cpu_context(), h.data(), x.data(), n);
  cpu::from_fp16(cpu_context(), x.data(), h.data(), n);
  EXPECT_EQ(0, std::memcmp(back.data(), x.data(), n * 4));
  EXPECT_EQ(back[999], -INFINITY);  // -69930 is past fp16's range
  EXPECT_EQ(back[2], 140.0f);
}

TEST_F(DevemuTest, OutOfDeviceMemoryNamesTheRequestAndWhatHoldsTheMemory) {
  Tensor held = Tensor::empty({1 << 20}, DType::kF32, MemCategory::kParameters, Device::kCUDA);
  const size_t too_much = devemu::GuardedArena::instance().capacity() + 1;
  try {
    mem_alloc(Device::kCUDA, too_much, MemCategory::kActivations);
    FAIL() << "allocated more than the emulated GPU has";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("out of memory"), std::string::npos) << m;
    EXPECT_NE(m.find("activations on cuda"), std::string::npos) << m;
    EXPECT_NE(m.find("parameters 4.00 MiB"), std::string::npos) << m;
  }
}

TEST_F(DevemuTest, FreedBlocksAreReused) {
  auto& a = devemu::GuardedArena::instance();
  void* p = a.alloc(1 << 20);
  a.free(p, 1 << 20);
  void* q = a.alloc(1 << 19);
  void* r = a.alloc(1 << 19);
  EXPECT_EQ(p, q);
  EXPECT_TRUE(a.contains(r, 1 << 19));
  a.free(q, 1 << 19);
  a.free(r, 1 << 19);
  EXPECT_EQ(p, a.alloc(1 << 20));  // the two halves coalesced
  a.free(p, 1 << 20);
}

}  // namespace
}  // namespace ft

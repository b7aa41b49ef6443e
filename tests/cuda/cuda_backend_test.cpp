// The CUDA backend as the rest of the program sees it, on any machine with the toolkit (a GPU is
// not needed): its OpTable has an entry for every op of op_decls.inc; registration makes the
// table, the DeviceRuntime and the DeviceMemory known for Device::kCUDA; and on a machine without
// a usable GPU (this development machine: no driver) the runtime reports 0 devices with the
// driver's reason on one line, and contexts and memory are refused with an error naming it.
#include <gtest/gtest.h>

#include <string>

#include "backends/cuda/context.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/runtime.h"
#include "kernels/ops.h"
#include "tensor/backend.h"
#include "tensor/device_runtime.h"
#include "tensor/memory.h"
#include "util/error.h"

namespace ft {
namespace {

TEST(CudaBackend, EveryOpOfTheListHasACudaEntry) {
  const OpTable& t = cuda::op_table();
  EXPECT_STREQ(t.backend, "cuda");
  size_t n = 0;
#define FT_OP(name, params, args)                                                                       \
  EXPECT_NE(t.name, nullptr) << #name " has no CUDA entry";                                             \
  EXPECT_NE(reinterpret_cast<const void*>(t.name), reinterpret_cast<const void*>(cpu::op_table().name)) \
      << #name " is the CPU's op";                                                                      \
  ++n;
#include "kernels/op_decls.inc"
#undef FT_OP
  EXPECT_EQ(n, kOpCount);
}

TEST(CudaBackend, RegistrationMakesTheDeviceKnown) {
  cuda::register_cuda_backend();
  cuda::register_cuda_backend();  // idempotent
  ASSERT_NE(find_backend(Device::kCUDA), nullptr);
  EXPECT_EQ(find_backend(Device::kCUDA)->ops, &cuda::op_table());
  EXPECT_NE(find_backend(Device::kCUDA)->auto_precision, nullptr);
  EXPECT_TRUE(device_runtime_registered(Device::kCUDA));
  EXPECT_TRUE(device_memory_registered(Device::kCUDA));
  EXPECT_EQ(device_count(Device::kCUDA), cuda::device_count());
}

// What this machine says: a GPU machine passes these trivially (the kernels_cuda_test covers it).
class WithoutGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    cuda::register_cuda_backend();
    if (cuda::device_count() > 0) GTEST_SKIP() << "a GPU is visible here: kernels_cuda_test checks the backend";
  }
};

TEST_F(WithoutGpu, NoDevicesAndTheDriversReasonOnOneLine) {
  EXPECT_EQ(device_count(Device::kCUDA), 0);
  const std::string why = device_unavailable_reason(Device::kCUDA);
  EXPECT_EQ(why, cuda::no_device_reason());
  EXPECT_NE(why.find("cudaGetDeviceCount: "), std::string::npos) << why;
  EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  // The CUDA error's name is in it (e.g. cudaErrorInsufficientDriver, cudaErrorNoDevice).
  EXPECT_NE(why.find("(cudaError"), std::string::npos) << why;
}

TEST_F(WithoutGpu, AContextIsAnErrorNamingTheDeviceAndWhy) {
  try {
    make_exec_context(Device::kCUDA, 0);
    FAIL() << "a CUDA context without a GPU";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "device cuda: " + cuda::no_device_reason());
    EXPECT_NE(e.hint().find("train.device"), std::string::npos) << e.hint();
  }
}

TEST_F(WithoutGpu, DeviceMemoryIsAnErrorNotACrash) {
  EXPECT_THROW(mem_alloc(Device::kCUDA, 1024, MemCategory::kActivations), Error);
  EXPECT_EQ(MemoryTracker::global().live(MemCategory::kActivations, Device::kCUDA), 0);
}

TEST_F(WithoutGpu, AnOpOnANonCudaContextNamesTheOp) {
  ExecContext not_cuda;  // the CPU's
  try {
    cuda::op_table().add_inplace(not_cuda, nullptr, nullptr, 4);
    FAIL() << "a CUDA op ran on a CPU context";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA op add_inplace: the context is not a CUDA context"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ft

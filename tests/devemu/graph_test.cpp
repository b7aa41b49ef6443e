// Graph capture on the emulated GPU (tensor/device_graph.h): a capture records and runs nothing,
// a replay re-runs the recording (reading its buffers again), and whatever a CUDA graph cannot
// hold — a host synchronisation, a read-back, a copy from pageable memory, an allocation — breaks
// the capture with an ft::Error naming the call, after which the stream works as before.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "devemu.h"
#include "kernels/ops.h"
#include "tensor/device_graph.h"
#include "tensor/device_runtime.h"
#include "tensor/device_scalars.h"
#include "tensor/memory.h"
#include "tensor/tensor.h"
#include "util/error.h"

namespace ft {
namespace {

class DevemuGraphTest : public ::testing::Test {
 protected:
  void SetUp() override {
    devemu::register_emulated_gpu();
    ctx_ = make_exec_context(Device::kCUDA, 0);
  }
  std::vector<float> read(const Tensor& t) {
    std::vector<float> v(static_cast<size_t>(t.numel()));
    mem_copy(ctx_, v.data(), Device::kCPU, t.raw(), Device::kCUDA, v.size() * 4);
    return v;
  }
  // The error a capture of `queue` ends with ("" when it held).
  std::string capture_error(const std::function<void()>& queue) {
    try {
      DeviceGraph::capture(ctx_, queue);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  ExecContext ctx_;
};

TEST_F(DevemuGraphTest, TheCpuRecordsNoGraphs) {
  EXPECT_FALSE(graphs_supported(cpu_context()));
  EXPECT_TRUE(graphs_supported(ctx_));
}

TEST_F(DevemuGraphTest, CaptureRunsNothingAndEachReplayRerunsItWithTheBuffersNow) {
  const int64_t n = 64;
  Tensor x = Tensor::zeros({n}, DType::kF32, MemCategory::kOther, Device::kCUDA);
  Tensor y = Tensor::zeros({n}, DType::kF32, MemCategory::kOther, Device::kCUDA);
  auto* pinned = static_cast<float*>(mem_alloc_host(Device::kCUDA, n * 4, MemCategory::kOther));
  for (int64_t i = 0; i < n; ++i) pinned[i] = 1.0f + static_cast<float>(i);
  DeviceGraph g = DeviceGraph::capture(ctx_, [&] {
    mem_copy(ctx_, x.raw(), Device::kCUDA, pinned, Device::kCPU, n * 4);  // the batch's upload
    ops::add_inplace(ctx_, y.data<float>(), x.data<float>(), n);
  });
  EXPECT_EQ(read(y), std::vector<float>(n, 0.0f));  // recorded, not run
  g.replay(ctx_);
  for (int64_t i = 0; i < n; ++i) pinned[i] = 100.0f;  // the next step's batch, staged outside
  g.replay(ctx_);
  const std::vector<float> v = read(y);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(v[i], 1.0f + static_cast<float>(i) + 100.0f) << i;
  mem_free_host(Device::kCUDA, pinned, n * 4, MemCategory::kOther);
}

TEST_F(DevemuGraphTest, AHostSynchronisationBreaksTheCaptureNamingIt) {
  Tensor y = Tensor::zeros({8}, DType::kF32, MemCategory::kOther, Device::kCUDA);
  const std::string e = capture_error([&] {
    ops::add_inplace(ctx_, y.data<float>(), y.data<float>(), 8);
    synchronize(ctx_);
  });
  EXPECT_NE(e.find("CUDA graph capture broken by synchronize"), std::string::npos) << e;
  EXPECT_NE(e.find("cudaErrorStreamCaptureUnsupported"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;  // one line
  // The stream is usable again, captures included.
  EXPECT_EQ(capture_error([&] { ops::add_inplace(ctx_, y.data<float>(), y.data<float>(), 8); }), "");
}

TEST_F(DevemuGraphTest, AReadBackInsideBreaksTheCapture) {
  DeviceScalars s(ctx_, 2);
  const std::string e = capture_error([&] { (void)s.read_back_sum(); });
  EXPECT_NE(e.find("a copy of 16 bytes to the host"), std::string::npos) << e;
}

TEST_F(DevemuGraphTest, ACopyFromPageableMemoryBreaksTheCapture) {
  Tensor x = Tensor::zeros({8}, DType::kF32, MemCategory::kOther, Device::kCUDA);
  std::vector<float> host(8, 1.0f);
  const std::string e =
      capture_error([&] { mem_copy(ctx_, x.raw(), Device::kCUDA, host.data(), Device::kCPU, host.size() * 4); });
  EXPECT_NE(e.find("from pageable host memory"), std::string::npos) << e;
}

TEST_F(DevemuGraphTest, AnAllocationOrAnotherStreamBreaksTheCapture) {
  std::string e = capture_error([&] { Tensor::zeros({8}, DType::kF32, MemCategory::kOther, Device::kCUDA); });
  EXPECT_NE(e.find("an allocation of 32 bytes"), std::string::npos) << e;
  Tensor y = Tensor::zeros({8}, DType::kF32, MemCategory::kOther, Device::kCUDA);
  ExecContext side = make_side_context(ctx_);
  e = capture_error([&] { ops::add_inplace(side, y.data<float>(), y.data<float>(), 8); });
  EXPECT_NE(e.find("op add_inplace on a stream other than the capturing one"), std::string::npos) << e;
}

}  // namespace
}  // namespace ft

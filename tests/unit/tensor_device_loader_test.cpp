// A backend loaded on first use (register_device_loader, tensor/device_runtime.h; the CUDA plugin
// in fluxtrain): the loader does not run when registered, runs once on the first question about
// its device, and when it fails its one-line error is the device's unavailable reason and a
// context's error, with its hint. (One process, one loader: the success path is the real plugin,
// tests/e2e/cuda_plugin_test.sh.)
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "kernels/ops.h"
#include "tensor/device_runtime.h"
#include "util/error.h"

namespace ft {
namespace {

std::atomic<int> g_calls{0};

DeviceLoadResult failing_loader() {
  ++g_calls;
  return {"libexample.so not found next to the binary (/opt/x)", "install it beside the binary"};
}

TEST(DeviceLoader, RunsOnceOnFirstUseAndItsErrorIsTheReason) {
  register_device_loader(Device::kCUDA, failing_loader);
  EXPECT_EQ(g_calls.load(), 0) << "registering must not load";
  EXPECT_EQ(device_count(Device::kCPU), 1);
  EXPECT_EQ(make_exec_context(Device::kCPU).device, Device::kCPU);
  EXPECT_EQ(g_calls.load(), 0) << "the CPU's questions must not load another device's backend";

  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([] { EXPECT_EQ(device_count(Device::kCUDA), 0); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(g_calls.load(), 1);
  EXPECT_EQ(device_unavailable_reason(Device::kCUDA), "libexample.so not found next to the binary (/opt/x)");
  EXPECT_FALSE(device_runtime_registered(Device::kCUDA));
  for (auto make : {+[] { make_exec_context(Device::kCUDA, 0); }, +[] { make_device_context(Device::kCUDA, 0); }}) {
    try {
      make();
      FAIL() << "a context of a device whose backend failed to load";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "device cuda: libexample.so not found next to the binary (/opt/x)");
      EXPECT_EQ(e.hint(), "install it beside the binary");
    }
  }
  EXPECT_EQ(g_calls.load(), 1);
}

}  // namespace
}  // namespace ft

// A backend loaded on first use (register_backend_plugin, tensor/backend.h; the CUDA plugin in
// fluxtrain): the loader does not run when registered, runs once on the first question about its
// device, and when it fails its one-line error is the device's unavailable reason and a context's
// error, with its hint. (One process, one loader: the success path is the real plugin,
// tests/e2e/cuda_plugin_test.sh.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "kernels/ops.h"
#include "tensor/backend.h"
#include "tensor/device_runtime.h"
#include "util/error.h"

namespace ft {
namespace {

// A plugin whose file is missing: the generic loader looks for it when first asked.
BackendPlugin missing_plugin() {
  BackendPlugin p;
  p.file = "libexample.so";
  p.env_var = "FT_TEST_EXAMPLE_PLUGIN";
  return p;
}

TEST(DeviceLoader, RunsOnceOnFirstUseAndItsErrorIsTheReason) {
  const std::string path = ::testing::TempDir() + "/no-such-plugin.so";
  setenv("FT_TEST_EXAMPLE_PLUGIN", path.c_str(), 1);
  register_backend_plugin(Device::kCUDA, missing_plugin());
  EXPECT_EQ(device_count(Device::kCPU), 1);
  EXPECT_EQ(make_exec_context(Device::kCPU).device, Device::kCPU);

  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([] { EXPECT_EQ(device_count(Device::kCUDA), 0); });
  for (auto& t : threads) t.join();
  // Loaded once, on the first question: a later change of the variable is not seen.
  setenv("FT_TEST_EXAMPLE_PLUGIN", "/elsewhere.so", 1);
  const std::string why = "FT_TEST_EXAMPLE_PLUGIN=" + path + ": no such file";
  EXPECT_EQ(device_unavailable_reason(Device::kCUDA), why);
  EXPECT_FALSE(device_runtime_registered(Device::kCUDA));
  try {
    make_exec_context(Device::kCUDA, 0);
    FAIL() << "a context of a device whose backend failed to load";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "device cuda: " + why);
    EXPECT_EQ(e.hint(),
              "point FT_TEST_EXAMPLE_PLUGIN at the libexample.so built with this fluxtrain, or unset it to "
              "use the one next to the binary");
  }
  unsetenv("FT_TEST_EXAMPLE_PLUGIN");
}

}  // namespace
}  // namespace ft

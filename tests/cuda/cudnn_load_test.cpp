// The CUDA backend's loader of its cuDNN sub-plugin (src/backends/cuda/cudnn_load.cpp) against this
// build's libfluxtrain_cudnn.so: opened with dlopen (with cuDNN, which it links), its entry point
// resolved, this build's id accepted and its table complete — none of which needs a GPU — and the
// one-line reasons when it cannot be used: a wrong path (the loader's error, naming the file), a
// library without the entry point, another build's id; the process's loader saying why once. And
// one CUDA runtime in the process.
#include "backends/cuda/cudnn_load.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <link.h>
#include <stdlib.h>

#include <iostream>
#include <string>

#include "backends/cuda/cuda_ops.h"
#include "tensor/backend.h"

namespace ft::cuda {
namespace {

// The loaded objects whose file name contains `part`.
int loaded_objects(const char* part) {
  struct Count {
    const char* part;
    int n;
  } count{part, 0};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* c = static_cast<Count*>(data);
        if (info->dlpi_name && std::string(info->dlpi_name).find(c->part) != std::string::npos) ++c->n;
        return 0;
      },
      &count);
  return count.n;
}

TEST(CudnnLoad, OpensTheSubPluginOfThisBuild) {
  const CudnnPlugin p = load_cudnn_plugin(FT_CUDNN_PLUGIN_FILE, build_id());
  ASSERT_TRUE(p.ok()) << p.error;
  EXPECT_EQ(p.library, FT_CUDNN_PLUGIN_FILE);
  EXPECT_GE(p.api.cudnn_version(), 90000u);  // cuDNN 9 (SDPA through the frontend's graph API)
  for (const void* f :
       {(const void*)p.api.create, (const void*)p.api.destroy, (const void*)p.api.prepare, (const void*)p.api.execute})
    EXPECT_NE(f, nullptr);
  // One CUDA runtime: the sub-plugin bound to the shared one this binary (as the plugin) links.
  EXPECT_EQ(loaded_objects("libcudart.so"), 1);
}

TEST(CudnnLoad, AWrongPathIsOneLineNamingItAndTheLoadersError) {
  const CudnnPlugin p = load_cudnn_plugin("/nonexistent/libfluxtrain_cudnn.so", build_id());
  EXPECT_FALSE(p.ok());
  EXPECT_EQ(p.error.find("cannot load the cuDNN plugin /nonexistent/libfluxtrain_cudnn.so: "), 0u) << p.error;
  EXPECT_NE(p.error.find("No such file"), std::string::npos) << p.error;  // dlerror's words
  EXPECT_EQ(p.error.find('\n'), std::string::npos) << p.error;
  EXPECT_EQ(p.api.create, nullptr);
}

TEST(CudnnLoad, ALibraryWithoutTheEntryIsRefused) {
  const CudnnPlugin p = load_cudnn_plugin("libm.so.6", build_id());
  EXPECT_NE(p.error.find("libm.so.6 has no entry point fluxtrain_cudnn_plugin"), std::string::npos) << p.error;
}

TEST(CudnnLoad, AnotherBuildsIdIsRefused) {
  const CudnnPlugin p = load_cudnn_plugin(FT_CUDNN_PLUGIN_FILE, "0.0.0-another-build");
  EXPECT_NE(p.error.find("it was built by another build of fluxtrain"), std::string::npos) << p.error;
  EXPECT_EQ(p.api.prepare, nullptr);
}

TEST(CudnnLoad, ThePathHonoursFtCudnnPlugin) {
  setenv("FT_CUDNN_PLUGIN", "/elsewhere/libfluxtrain_cudnn.so", 1);
  EXPECT_EQ(cudnn_plugin_path(), "/elsewhere/libfluxtrain_cudnn.so");
  unsetenv("FT_CUDNN_PLUGIN");
  // Without it: beside the object holding the loader (here this test binary).
  const std::string path = cudnn_plugin_path();
  EXPECT_EQ(path.front(), '/') << path;
  EXPECT_NE(path.find("tests/cuda/libfluxtrain_cudnn.so"), std::string::npos) << path;
}

// What the bf16/fp16 attention ops ask before they fall back (no GPU needed to ask): the process's
// sub-plugin cannot be opened, the reason names the file and the loader's error, and it is said
// once, in one log line, however often it is asked. (The only test here that loads the process's.)
TEST(CudnnLoad, TheProcessSaysWhyOnceWhenItCannotLoadIt) {
  setenv("FT_CUDNN_PLUGIN", "/nonexistent/libfluxtrain_cudnn.so", 1);
  testing::internal::CaptureStderr();
  EXPECT_FALSE(have_cudnn_sdpa());
  EXPECT_FALSE(have_cudnn_sdpa());
  const std::string log = testing::internal::GetCapturedStderr();
  unsetenv("FT_CUDNN_PLUGIN");
  const std::string why = cudnn_sdpa_missing_reason();
  EXPECT_EQ(why.find("cannot load the cuDNN plugin /nonexistent/libfluxtrain_cudnn.so: "), 0u) << why;
  size_t lines = 0;
  for (char c : log) lines += c == '\n';
  EXPECT_EQ(lines, 1u) << log;
  EXPECT_NE(log.find("fp32 kernels"), std::string::npos) << log;
  EXPECT_NE(log.find(why), std::string::npos) << log;
  std::cout << "said: " << log;
}

}  // namespace
}  // namespace ft::cuda

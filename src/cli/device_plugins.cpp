#include "cli/device_plugins.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "kernels/ops.h"
#include "tensor/device_runtime.h"

#if FT_HAVE_CUDA
#include "backends/cuda/plugin_entry.h"
#endif

namespace ft::cli {
namespace {

#if FT_HAVE_CUDA

// The directory of the running binary (/proc/self/exe), "" when it cannot be read.
std::string binary_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "" : exe.parent_path().string();
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

DeviceLoadResult load_cuda_plugin() {
  const char* env = std::getenv("FT_CUDA_PLUGIN");
  const bool from_env = env != nullptr && *env != '\0';
  const std::string dir = binary_dir();
  const std::string path = from_env ? std::string(env) : dir + "/" FT_CUDA_PLUGIN_FILE;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    if (from_env)
      return {fmt::format("FT_CUDA_PLUGIN={}: no such file", path), "point FT_CUDA_PLUGIN at the " FT_CUDA_PLUGIN_FILE
                                                                    " built with this fluxtrain, or unset it to use "
                                                                    "the one next to the binary"};
    return {fmt::format(FT_CUDA_PLUGIN_FILE " not found next to the binary ({})", dir),
            "install it beside fluxtrain (the build writes both into one directory; scripts/gpu_check.sh --pack "
            "carries both), point FT_CUDA_PLUGIN at it, or set train.device = \"cpu\""};
  }
  // RTLD_NOW: a symbol it needs that the binary lacks is an error here, not a crash later.
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* err = dlerror();
    return {fmt::format("loading {}: {}", path, one_line(err ? err : "unknown error")),
            "the CUDA libraries it links (cuBLASLt, cuDNN, NVRTC) must be where the loader finds them: `ldd " + path +
                "` names the missing one (LD_LIBRARY_PATH, or install the CUDA toolkit / cuDNN)"};
  }
  auto reg = reinterpret_cast<FtCudaPluginRegister>(dlsym(h, FT_CUDA_PLUGIN_ENTRY));
  if (reg == nullptr)
    return {fmt::format("{} has no entry point " FT_CUDA_PLUGIN_ENTRY ": not a fluxtrain CUDA plugin", path),
            "use the " FT_CUDA_PLUGIN_FILE " built with this fluxtrain"};
  if (const char* why = reg(kOpCount, sizeof(OpTable)))
    return {fmt::format("{}: {}", path, why), "use the " FT_CUDA_PLUGIN_FILE " built with this fluxtrain"};
  return {};  // the plugin stays loaded for the process's life
}

#else

DeviceLoadResult load_cuda_plugin() {
  return {"this fluxtrain was built without CUDA",
          "build it where the CUDA toolkit is installed (nvcc on PATH; cmake -DFT_CUDA=ON), or set train.device = "
          "\"cpu\""};
}

#endif

}  // namespace

void register_backends() {
  register_device_loader(Device::kCUDA, load_cuda_plugin);
}

}  // namespace ft::cli

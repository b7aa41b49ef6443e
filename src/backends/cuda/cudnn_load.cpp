// cudnn_plugin() for the CUDA backend: libfluxtrain_cudnn.so opened with dlopen on the first SDPA
// call (cudnn_load.h).
#include "backends/cuda/cudnn_load.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <link.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "tensor/backend.h"
#include "util/log.h"

namespace ft::cuda {

namespace {

constexpr const char* kFile = "libfluxtrain_cudnn.so";

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

std::string loaded_path(void* handle, const std::string& fallback) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name) return map->l_name;
  return fallback;
}

// The directory of the object holding this function: the CUDA plugin, or a binary that links the
// backend statically (dladdr names the main program by argv[0], which may be relative: then
// /proc/self/exe).
std::string this_object_dir() {
  Dl_info info{};
  std::filesystem::path p;
  if (dladdr(reinterpret_cast<const void*>(&this_object_dir), &info) != 0 && info.dli_fname) p = info.dli_fname;
  if (!p.is_absolute()) {
    std::error_code ec;
    p = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) return ".";
  }
  return p.parent_path().string();
}

}  // namespace

CudnnPlugin load_cudnn_plugin(const std::string& path, const char* build_id) {
  CudnnPlugin p;
  p.library = path;
  // RTLD_LOCAL: cuDNN's and the frontend's symbols stay out of the process's namespace. The
  // sub-plugin links the shared CUDA runtime, which the backend links too: the loader finds
  // libcudart.so.13 already loaded and both use that one (src/backends/cuda/CMakeLists.txt).
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    p.error = one_line(fmt::format("cannot load the cuDNN plugin {}: {}", path, why ? why : "dlopen failed"));
    return p;
  }
  p.library = loaded_path(handle, path);
  dlerror();
  auto entry = reinterpret_cast<FtCudnnPluginEntry>(dlsym(handle, FT_CUDNN_PLUGIN_ENTRY));
  if (!entry) {
    p.error = fmt::format("{} has no entry point " FT_CUDNN_PLUGIN_ENTRY ": not a fluxtrain cuDNN plugin", path);
  } else if (const char* why = entry(build_id, sizeof(FtCudnnApi), &p.api)) {
    p.error = fmt::format("{}: {}", path, why);
  } else if (!p.api.cudnn_version || !p.api.create || !p.api.destroy || !p.api.prepare || !p.api.execute) {
    p.error = fmt::format("{}: its function table is incomplete", path);
  }
  if (!p.ok()) {
    p.api = FtCudnnApi{};
    dlclose(handle);
  }
  return p;  // a loaded sub-plugin stays open for the life of the process
}

std::string cudnn_plugin_path() {
  const char* env = std::getenv("FT_CUDNN_PLUGIN");
  if (env && *env) return env;
  return this_object_dir() + "/" + kFile;
}

const CudnnPlugin& cudnn_plugin() {
  static std::once_flag once;
  static CudnnPlugin plugin;
  std::call_once(once, [] {
#if FT_HAVE_CUDNN
    plugin = load_cudnn_plugin(cudnn_plugin_path(), build_id());
    if (plugin.ok()) {
      log_debug("cuDNN SDPA: {} (cuDNN {})", plugin.library, plugin.api.cudnn_version());
      return;
    }
    log_warn(
        "bf16/fp16 attention runs on the fp32 kernels (no cuDNN SDPA): {}; hint: put cuDNN 9 (libcudnn.so.9) "
        "where the loader finds it (LD_LIBRARY_PATH), or set FT_CUDNN_PLUGIN to this build's {}",
        plugin.error, kFile);
#else
    plugin.error =
        "this build has no cuDNN SDPA (cuDNN or the cuDNN frontend headers were not found when it was configured)";
    log_warn("bf16/fp16 attention runs on the fp32 kernels: {}", plugin.error);
#endif
  });
  return plugin;
}

}  // namespace ft::cuda

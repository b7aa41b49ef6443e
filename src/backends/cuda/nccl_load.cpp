// nccl_api() for the CUDA plugin: libnccl.so.2 opened with dlopen on the first call (nccl_api.h).
#include <dlfcn.h>
#include <fmt/format.h>
#include <link.h>

#include <cstdlib>
#include <mutex>
#include <optional>

#include "backends/cuda/nccl_api.h"
#include "parallel/comm/comm.h"

namespace ft {

namespace {

constexpr const char* kHint =
    "install NCCL 2 (e.g. the nvidia-nccl-cu13 wheel, or the libnccl2 package) and put the directory "
    "of libnccl.so.2 on LD_LIBRARY_PATH, or set FT_NCCL_LIBRARY to its path; or use parallel.comm = \"mpi\"";

template <class F>
void resolve(void* handle, const std::string& library, const char* name, F& slot) {
  dlerror();
  void* f = dlsym(handle, name);
  if (!f) {
    const char* why = dlerror();
    throw CommError(fmt::format("NCCL library {} has no {}: {}", library, name, why ? why : "null symbol"), kHint);
  }
  slot = reinterpret_cast<F>(f);
}

std::string loaded_path(void* handle, const std::string& fallback) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name) return map->l_name;
  return fallback;
}

}  // namespace

NcclApi load_nccl_library(const std::string& library) {
  // RTLD_LOCAL: NCCL's symbols stay out of the process's namespace (nothing else binds to them).
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    throw CommError(fmt::format("cannot load the NCCL library {}: {}", library, why ? why : "dlopen failed"), kHint);
  }
  NcclApi a;
  try {
    resolve(handle, library, "ncclGetVersion", a.GetVersion);
    resolve(handle, library, "ncclGetErrorString", a.GetErrorString);
    resolve(handle, library, "ncclGetLastError", a.GetLastError);
    resolve(handle, library, "ncclGetUniqueId", a.GetUniqueId);
    resolve(handle, library, "ncclCommInitRankConfig", a.CommInitRankConfig);
    resolve(handle, library, "ncclCommGetAsyncError", a.CommGetAsyncError);
    resolve(handle, library, "ncclCommFinalize", a.CommFinalize);
    resolve(handle, library, "ncclCommDestroy", a.CommDestroy);
    resolve(handle, library, "ncclCommAbort", a.CommAbort);
    resolve(handle, library, "ncclAllReduce", a.AllReduce);
    resolve(handle, library, "ncclReduceScatter", a.ReduceScatter);
    resolve(handle, library, "ncclAllGather", a.AllGather);
    resolve(handle, library, "ncclBroadcast", a.Broadcast);
    resolve(handle, library, "ncclSend", a.Send);
    resolve(handle, library, "ncclRecv", a.Recv);
    resolve(handle, library, "ncclGroupStart", a.GroupStart);
    resolve(handle, library, "ncclGroupEnd", a.GroupEnd);
  } catch (...) {
    dlclose(handle);
    throw;
  }
  a.library = loaded_path(handle, library);
  return a;  // the handle stays open for the life of the process
}

const NcclApi& nccl_api() {
  static std::mutex mu;
  static std::optional<NcclApi> api;
  std::lock_guard<std::mutex> lock(mu);
  if (!api) {
    const char* env = std::getenv("FT_NCCL_LIBRARY");
    api = load_nccl_library(env && *env ? env : "libnccl.so.2");
  }
  return *api;
}

}  // namespace ft

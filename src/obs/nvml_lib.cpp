#include "obs/nvml_lib.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>

namespace ft::obs {

template <typename F>
static void resolve(void* handle, const char* name, F*& out) {
  out = reinterpret_cast<F*>(::dlsym(handle, name));
}

std::unique_ptr<NvmlLib> NvmlLib::open(const std::string& path_in, std::string* why) {
  std::string path = path_in;
  if (path.empty()) {
    const char* env = std::getenv("FLUXTRAIN_NVML_LIB");
    path = env && *env ? env : "libnvidia-ml.so.1";
  }
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = ::dlerror();
    *why = "no NVIDIA driver: " + (e ? std::string(e) : "cannot load " + path);  // dlerror names the file
    return nullptr;
  }
  std::unique_ptr<NvmlLib> lib(new NvmlLib());
  lib->handle_ = h;
  lib->path_ = path;
  NvmlReturn (*init)() = nullptr;
  resolve(h, "nvmlInit_v2", init);
  resolve(h, "nvmlShutdown", lib->shutdown_);
  resolve(h, "nvmlErrorString", lib->error_string_);
  if (!init || !lib->shutdown_) {
    *why = fmt::format("{} has no nvmlInit_v2/nvmlShutdown: not an NVML library", path);
    return nullptr;  // the destructor closes the handle; shutdown_ may be null
  }
  NvmlReturn rc = init();
  if (rc != kNvmlSuccess) {
    *why = fmt::format("nvmlInit_v2 failed: {}", lib->error_string(rc));
    lib->shutdown_ = nullptr;  // nothing to shut down
    return nullptr;
  }
  resolve(h, "nvmlDeviceGetCount_v2", lib->device_get_count);
  resolve(h, "nvmlDeviceGetHandleByIndex_v2", lib->device_get_handle_by_index);
  resolve(h, "nvmlDeviceGetName", lib->device_get_name);
  resolve(h, "nvmlDeviceGetUUID", lib->device_get_uuid);
  resolve(h, "nvmlDeviceGetTemperature", lib->device_get_temperature);
  resolve(h, "nvmlDeviceGetPowerUsage", lib->device_get_power_usage);
  resolve(h, "nvmlDeviceGetUtilizationRates", lib->device_get_utilization_rates);
  resolve(h, "nvmlDeviceGetMemoryInfo", lib->device_get_memory_info);
  resolve(h, "nvmlDeviceGetClockInfo", lib->device_get_clock_info);
  resolve(h, lib->throttle_fn, lib->device_get_throttle_reasons);
  if (!lib->device_get_throttle_reasons) {
    lib->throttle_fn = "nvmlDeviceGetCurrentClocksThrottleReasons";  // the name before driver 535
    resolve(h, lib->throttle_fn, lib->device_get_throttle_reasons);
  }
  resolve(h, "nvmlDeviceGetTotalEccErrors", lib->device_get_total_ecc_errors);
  resolve(h, "nvmlDeviceGetRemappedRows", lib->device_get_remapped_rows);
  resolve(h, "nvmlDeviceGetRetiredPages", lib->device_get_retired_pages);
  resolve(h, "nvmlEventSetCreate", lib->event_set_create);
  resolve(h, "nvmlDeviceRegisterEvents", lib->device_register_events);
  resolve(h, "nvmlEventSetWait_v2", lib->event_set_wait);
  resolve(h, "nvmlEventSetFree", lib->event_set_free);
  if (!lib->device_get_count || !lib->device_get_handle_by_index) {
    *why = fmt::format("{} lacks nvmlDeviceGetCount_v2/nvmlDeviceGetHandleByIndex_v2 (driver too old?)", path);
    return nullptr;
  }
  return lib;
}

NvmlLib::~NvmlLib() {
  if (shutdown_) shutdown_();
  if (handle_) ::dlclose(handle_);
}

std::string NvmlLib::error_string(NvmlReturn rc) const {
  const char* s = error_string_ ? error_string_(rc) : nullptr;
  return s ? fmt::format("{} (NVML error {})", s, rc) : fmt::format("NVML error {}", rc);
}

}  // namespace ft::obs

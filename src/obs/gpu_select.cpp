#include "obs/gpu_select.h"

#include <fmt/format.h>

#include <cctype>
#include <cstdlib>

#include "obs/nvml_lib.h"
#include "util/strings.h"

namespace ft::obs {
namespace {

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// The NVML index of the GPU whose UUID starts with `prefix` ("GPU-" optional); -1 when none or
// several match.
int by_uuid(std::string prefix, const std::vector<std::string>& uuids, std::string* why) {
  if (prefix.rfind("GPU-", 0) != 0) prefix = "GPU-" + prefix;
  int found = -1, n = 0;
  for (size_t i = 0; i < uuids.size(); ++i)
    if (uuids[i].rfind(prefix, 0) == 0) found = static_cast<int>(i), ++n;
  if (n == 1) return found;
  *why = n == 0 ? fmt::format("no GPU has the UUID {}", prefix)
                : fmt::format("{} GPUs have UUIDs starting {}: not unique", n, prefix);
  return -1;
}

}  // namespace

GpuPick pick_nvml_gpu(int cuda_device, const char* visible, const std::vector<std::string>& nvml_uuids) {
  GpuPick p;
  const int count = static_cast<int>(nvml_uuids.size());
  if (cuda_device < 0) {
    p.why = fmt::format("CUDA device {} is not a device", cuda_device);
    return p;
  }
  if (visible == nullptr) {  // every GPU, in PCI order
    if (cuda_device < count)
      p.nvml_index = cuda_device;
    else
      p.why = fmt::format("CUDA device {} does not exist: NVML sees {} GPU(s)", cuda_device, count);
    return p;
  }
  // The entries CUDA honours: up to the first one that names no GPU.
  std::vector<int> order;
  std::string stopped;
  for (const std::string& raw : split(visible, ',')) {
    const std::string e(trim(raw));
    int idx = -1;
    std::string why;
    if (all_digits(e)) {
      idx = std::atoi(e.c_str());
      if (idx >= count) why = fmt::format("index {} is past the {} GPU(s) NVML sees", e, count);
    } else if (e.rfind("MIG-", 0) == 0) {
      why = fmt::format("{} is a MIG instance (not sampled)", e);
    } else if (!e.empty()) {
      idx = by_uuid(e, nvml_uuids, &why);
    } else {
      why = "an empty entry";
    }
    if (!why.empty() || idx < 0) {
      stopped = why;
      break;
    }
    order.push_back(idx);
  }
  if (cuda_device < static_cast<int>(order.size())) {
    p.nvml_index = order[static_cast<size_t>(cuda_device)];
    return p;
  }
  p.why = fmt::format("CUDA_VISIBLE_DEVICES='{}' makes {} GPU(s) visible, so CUDA device {} is none of them{}", visible,
                      order.size(), cuda_device, stopped.empty() ? "" : " (it stops at " + stopped + ")");
  return p;
}

std::string cuda_device_name(int cuda_device, std::string* why, const std::string& nvml_library) {
  auto nvml = NvmlLib::open(nvml_library, why);
  if (!nvml) return "";
  unsigned count = 0;
  if (NvmlReturn rc = nvml->device_get_count(&count); rc != kNvmlSuccess) {
    *why = "nvmlDeviceGetCount_v2 failed: " + nvml->error_string(rc);
    return "";
  }
  std::vector<std::string> uuids;
  std::vector<NvmlDevice> devs;
  for (unsigned i = 0; i < count; ++i) {
    NvmlDevice d = nullptr;
    char uuid[96] = "";
    if (nvml->device_get_handle_by_index(i, &d) == kNvmlSuccess && nvml->device_get_uuid)
      nvml->device_get_uuid(d, uuid, sizeof uuid);
    uuids.emplace_back(uuid);
    devs.push_back(d);
  }
  const GpuPick p = pick_nvml_gpu(cuda_device, std::getenv("CUDA_VISIBLE_DEVICES"), uuids);
  if (p.nvml_index < 0) {
    *why = p.why;
    return "";
  }
  char name[96] = "";
  NvmlDevice d = devs[static_cast<size_t>(p.nvml_index)];
  NvmlReturn rc = nvml->device_get_name && d ? nvml->device_get_name(d, name, sizeof name) : -1;
  if (rc != kNvmlSuccess) {
    *why = fmt::format("nvmlDeviceGetName on GPU {} failed", p.nvml_index);
    return "";
  }
  return name;
}

}  // namespace ft::obs

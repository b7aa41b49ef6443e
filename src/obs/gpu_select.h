// Which GPU a rank drives, in NVML's numbering — so that the GPU sampler watches the rank's own
// GPU and MFU uses its peak. A rank uses CUDA device `local rank mod visible GPUs`
// (tensor/device_runtime.h); CUDA numbers the GPUs CUDA_VISIBLE_DEVICES lists, in its order, and
// NVML numbers every GPU of the node in PCI bus order.
//
//   GpuPick p = pick_nvml_gpu(/*cuda_device=*/3, std::getenv("CUDA_VISIBLE_DEVICES"), uuids);
//   if (p.nvml_index < 0) log_info("no GPU metrics: {}", p.why);
//
// CUDA_VISIBLE_DEVICES as CUDA reads it: a comma-separated list of GPU indices or GPU UUIDs
// ("GPU-8a1e…", a unique prefix is enough); parsing stops at the first entry that names no GPU;
// "" hides every GPU; unset shows all. An index is taken in NVML's (PCI bus) order, which is
// CUDA's with CUDA_DEVICE_ORDER=PCI_BUS_ID (fluxtrain launch and deploy/ set it; CUDA's default
// order, fastest first, is the same on a node of identical GPUs). A MIG instance ("MIG-…") is not
// resolved: NVML reports its parent GPU under another handle API we do not call.
#pragma once

#include <string>
#include <vector>

namespace ft::obs {

struct GpuPick {
  int nvml_index = -1;  // -1: not found, `why` says why
  std::string why;
};

// cuda_device: the CUDA ordinal the rank uses. visible: $CUDA_VISIBLE_DEVICES, nullptr when unset.
// nvml_uuids: the UUID of each NVML device, by NVML index.
GpuPick pick_nvml_gpu(int cuda_device, const char* visible, const std::vector<std::string>& nvml_uuids);

// The product name of CUDA device `cuda_device` of this process ("NVIDIA H100 80GB HBM3") read
// through NVML (nvml_lib.h; "" = $FLUXTRAIN_NVML_LIB or libnvidia-ml.so.1); "" with *why set when
// there is no driver or the GPU cannot be found.
std::string cuda_device_name(int cuda_device, std::string* why, const std::string& nvml_library = "");

}  // namespace ft::obs

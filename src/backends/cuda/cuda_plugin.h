// How a binary loads the CUDA backend (the binary's half of the plugin; the plugin's half is
// plugin_entry.cpp): the file libfluxtrain_cuda.so next to the binary, or $FT_CUDA_PLUGIN, loaded
// by the generic loader (tensor/backend.h) the first time a command asks for a CUDA device —
// commands that never do map no CUDA library. In a build without CUDA, device cuda's reason is
// "this fluxtrain was built without CUDA".
//
//   register_backend_plugin(Device::kCUDA, cuda::plugin());   // cli/device_plugins.cpp
//
// Its unavailable reasons, one line with a hint each: built without CUDA; "libfluxtrain_cuda.so
// not found next to the binary (DIR)" (or FT_CUDA_PLUGIN's file missing); "loading PATH:
// <dlerror>" (a CUDA library it needs is missing); a plugin from another build; and once loaded,
// the driver's own reason when no GPU is usable ("cudaGetDeviceCount: ...").
#pragma once

#include "tensor/backend.h"

namespace ft::cuda {

BackendPlugin plugin();

}  // namespace ft::cuda

// The CUDA plugin's one entry point (libfluxtrain_cuda.so; cli/device_plugins.cpp loads it when a
// command first asks for a CUDA device). The plugin holds the backend's code and links the CUDA
// libraries; every ft symbol it uses (the registries, MemoryTracker, errors, logging) is the
// executable's own, resolved when the plugin is loaded.
#include "backends/cuda/plugin_entry.h"

#include <cstddef>

#include "backends/cuda/runtime.h"
#include "kernels/ops.h"

extern "C" const char* fluxtrain_cuda_plugin_register(size_t op_count, size_t op_table_bytes) {
  // A plugin built from another tree has another op list: its table would be read out of step.
  if (op_count != ft::kOpCount || op_table_bytes != sizeof(ft::OpTable))
    return "it was built from another version of fluxtrain (its op list differs)";
  ft::cuda::register_cuda_backend();
  return nullptr;
}

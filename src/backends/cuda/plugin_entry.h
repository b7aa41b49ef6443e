// The CUDA plugin's entry point, looked up by name with dlsym (cli/device_plugins.cpp) after the plugin
// was loaded: registers the backend's OpTable, DeviceRuntime and DeviceMemory for Device::kCUDA
// (backends/cuda/runtime.h). The caller passes its own op count and OpTable size; a plugin that
// does not match them registers nothing and returns why (one line). Returns null on success.
#pragma once

#include <cstddef>

#define FT_CUDA_PLUGIN_ENTRY "fluxtrain_cuda_plugin_register"
#define FT_CUDA_PLUGIN_FILE "libfluxtrain_cuda.so"

extern "C" {
using FtCudaPluginRegister = const char* (*)(size_t op_count, size_t op_table_bytes);
const char* fluxtrain_cuda_plugin_register(size_t op_count, size_t op_table_bytes);
}

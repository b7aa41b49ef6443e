// The CUDA backend's loader of its cuDNN sub-plugin (libfluxtrain_cudnn.so, cudnn_plugin_api.h):
// opened with dlopen on the first SDPA call, so that the CUDA plugin itself links no cuDNN and
// loads on a machine without it; where it cannot be opened, bf16/fp16 attention runs on the fp32
// kernels and the process says why once (one log line naming the library and the loader's error).
//
//   const CudnnPlugin& p = cudnn_plugin();   // the first call loads it (thread-safe), never throws
//   if (p.ok()) state = p.api.create(stream, error, sizeof error);
//   else fall back: p.error says why ("cannot load the cuDNN plugin PATH: libcudnn.so.9: ...")
//
// Where: $FT_CUDNN_PLUGIN when set (as $FT_CUDA_PLUGIN for the CUDA plugin), else the file next to
// the object that holds this code — libfluxtrain_cuda.so (the build and scripts/gpu_check.sh's pack
// put both in one directory), or the test binary that links the backend statically.
#pragma once

#include <string>

#include "backends/cuda/cudnn_plugin_api.h"

namespace ft::cuda {

struct CudnnPlugin {
  FtCudnnApi api{};     // every entry set when ok()
  std::string library;  // the path it was loaded from (or tried)
  std::string error;    // why it cannot be used, one line; "" when it loaded
  bool ok() const { return error.empty(); }
};

// Loads `path` and checks its entry point against `build_id`; never throws. Errors:
// "cannot load the cuDNN plugin PATH: <dlerror>", "PATH has no entry point fluxtrain_cudnn_plugin",
// "PATH: it was built by another build of fluxtrain (...)".
CudnnPlugin load_cudnn_plugin(const std::string& path, const char* build_id);

// The path the process loads: $FT_CUDNN_PLUGIN, else libfluxtrain_cudnn.so next to this object.
std::string cudnn_plugin_path();

// The process's sub-plugin, loaded on the first call with this build's id; a failure is logged
// once (a warning) and remembered. In a build without cuDNN SDPA: that reason, nothing opened.
const CudnnPlugin& cudnn_plugin();

}  // namespace ft::cuda

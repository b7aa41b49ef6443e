// The cuDNN sub-plugin's one entry point (libfluxtrain_cudnn.so, cudnn_plugin_api.h): it checks
// that the CUDA backend opening it comes from the same build (the build id, compiled in here as a
// literal) and hands over its table. Kept apart from cudnn_sdpa.cpp so that a new build id
// recompiles this small file, not the frontend's slow one.
#include <cstring>
#include <type_traits>

#include "backends/cuda/cudnn_plugin_api.h"
#include "build_id.h"

namespace ft::cuda {
void fill_cudnn_api(FtCudnnApi& api);  // cudnn_sdpa.cpp
}  // namespace ft::cuda

extern "C" __attribute__((visibility("default"))) const char* fluxtrain_cudnn_plugin(const char* build_id,
                                                                                     size_t api_bytes,
                                                                                     FtCudnnApi* api) {
  if (build_id == nullptr || std::strcmp(build_id, FT_BUILD_ID) != 0)
    return "it was built by another build of fluxtrain (build id " FT_BUILD_ID ")";
  if (api_bytes != sizeof(FtCudnnApi) || api == nullptr)
    return "it was built from another version of fluxtrain (its function table differs)";
  ft::cuda::fill_cudnn_api(*api);
  return nullptr;
}

static_assert(std::is_same_v<decltype(&fluxtrain_cudnn_plugin), FtCudnnPluginEntry>);

// The CUDA plugin's one entry point (libfluxtrain_cuda.so; tensor/backend.cpp's generic loader
// calls it when a command first asks for a CUDA device, cuda_plugin.cpp says where the file is).
// The plugin holds the backend's code and links the CUDA libraries; every ft symbol it uses (the
// registry, MemoryTracker, errors, logging) is the executable's own, resolved when it is loaded —
// so it must come from the same build: the build id (build_id.h, compiled in here as a literal,
// not read through the executable) and the op list must match.
#include <cstddef>
#include <cstring>

#include "backends/cuda/runtime.h"
#include "build_id.h"
#include "kernels/ops.h"
#include "tensor/backend.h"

#if FT_PLUGIN_NCCL
#include "backends/cuda/nccl_comm.h"
#endif

extern "C" __attribute__((visibility("default"))) const char* fluxtrain_backend_plugin(const char* build_id,
                                                                                       size_t op_count,
                                                                                       size_t op_table_bytes) {
  if (build_id == nullptr || std::strcmp(build_id, FT_BUILD_ID) != 0)
    return "it was built by another build of fluxtrain (build id " FT_BUILD_ID ")";
  // A plugin built from another tree has another op list: its table would be read out of step.
  if (op_count != ft::kOpCount || op_table_bytes != sizeof(ft::OpTable))
    return "it was built from another version of fluxtrain (its op list differs)";
#if FT_PLUGIN_NCCL
  ft::cuda::register_cuda_backend(&ft::nccl_transport());  // NcclComm: nccl_register.cpp
#else
  ft::cuda::register_cuda_backend();
#endif
  return nullptr;
}

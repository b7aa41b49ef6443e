// fluxtrain-vgpu's backends: the CUDA plugin's code linked in (ft_vgpu_plugin: the real host code
// on the virtual runtime, the kernels on the SIMT executor, cuBLASLt emulated) and registered at
// start-up (with NcclComm where NCCL's headers are found), in place of cli/device_plugins.cpp's loader of
// libfluxtrain_cuda.so — so a real plugin beside the binary is never opened and `train.device = "cuda"` trains on the
// virtual GPU.
#include "backends/cuda/runtime.h"
#include "cli/device_plugins.h"

#if FT_VGPU_NCCL
#include "backends/cuda/nccl_comm.h"
#endif

namespace ft::cli {

void register_backends() {
#if FT_VGPU_NCCL
  cuda::register_cuda_backend(&nccl_transport());  // as the plugin's entry does in a build with NCCL
#else
  cuda::register_cuda_backend();
#endif
}

}  // namespace ft::cli

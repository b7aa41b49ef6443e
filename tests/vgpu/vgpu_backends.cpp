// fluxtrain-vgpu's backends: the CUDA plugin's code linked in (ft_vgpu_plugin: the real host code
// on the virtual runtime, the kernels on the SIMT executor, cuBLASLt emulated) and registered at
// start-up, in place of cli/device_plugins.cpp's loader of libfluxtrain_cuda.so — so a real plugin
// beside the binary is never opened and `train.device = "cuda"` trains on the virtual GPU.
#include "backends/cuda/runtime.h"
#include "cli/device_plugins.h"

namespace ft::cli {

void register_backends() {
  cuda::register_cuda_backend();
}

}  // namespace ft::cli

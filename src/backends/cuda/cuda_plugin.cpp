#include "backends/cuda/cuda_plugin.h"

#include "kernels/ops.h"

namespace ft::cuda {

BackendPlugin plugin() {
  BackendPlugin p;
  p.file = "libfluxtrain_cuda.so";
  p.env_var = "FT_CUDA_PLUGIN";
  p.op_count = kOpCount;
  p.op_table_bytes = sizeof(OpTable);
#if !FT_HAVE_CUDA
  p.missing = "this fluxtrain was built without CUDA";
  p.missing_hint =
      "build it where the CUDA toolkit is installed (nvcc on PATH; cmake -DFT_CUDA=ON), or set train.device = \"cpu\"";
#endif
  p.open_hint =
      "the CUDA libraries it links (the CUDA runtime, cuBLASLt) must be where the loader finds them: `ldd {}` names "
      "the "
      "missing one (LD_LIBRARY_PATH, or install the CUDA toolkit / cuDNN)";
  return p;
}

}  // namespace ft::cuda

#include "cli/backends.h"

#if FT_HAVE_CUDA
#include "kernels/cuda/runtime.h"
#endif

namespace ft::cli {

void register_backends() {
#if FT_HAVE_CUDA
  cuda::register_cuda_backend();
#endif
}

}  // namespace ft::cli

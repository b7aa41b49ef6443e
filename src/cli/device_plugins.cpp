#include "cli/device_plugins.h"

#include "backends/cuda/cuda_plugin.h"
#include "tensor/backend.h"

namespace ft::cli {

void register_backends() {
  // One line per device kind that is a plugin (tensor/backend.h, register_backend_plugin).
  register_backend_plugin(Device::kCUDA, cuda::plugin());
}

}  // namespace ft::cli

#include "parallel/comm/device_comm.h"

#include "tensor/backend.h"
#include "util/error.h"

namespace ft {

const DeviceCommBackend* device_comm_backend() {
  // A device's own first (the CUDA backend's NCCL), then the host's.
  for (size_t i = kNumDevices; i-- > 0;)
    if (const Backend* b = registered_backend(static_cast<Device>(i)); b && b->comm) return b->comm;
  return nullptr;
}

bool use_device_comm(CommBackend choice, const ExecContext& ctx) {
  const DeviceCommBackend* b = device_comm_backend();
  const bool on_gpu = !ctx.on_host();
  switch (choice) {
    case CommBackend::kMpi:
      return false;  // on a GPU: device buffers staged through host memory (host_staged_comm.h)
    case CommBackend::kAuto:
      return on_gpu && b != nullptr;  // a GPU rank without NCCL in the build: MPI, staged
    case CommBackend::kNccl:
      if (!b) {
        throw Error(
            "parallel.comm = \"nccl\": this build has no NCCL (the CUDA toolkit with NCCL was not found when "
            "it was built)",
            "use parallel.comm = \"mpi\" or \"auto\", or build where the CUDA toolkit and NCCL are installed");
      }
      if (!on_gpu) {
        throw Error(
            "parallel.comm = \"nccl\" needs train.device = \"cuda\": NCCL moves device buffers and this rank "
            "computes on the CPU",
            "set train.device = \"cuda\", or parallel.comm = \"auto\" (MPI on CPU ranks)");
      }
      return true;
  }
  return false;
}

}  // namespace ft

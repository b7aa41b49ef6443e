#include "parallel/comm/device_comm.h"

#include <atomic>

#include "util/error.h"

namespace ft {

namespace {
std::atomic<const DeviceCommBackend*> g_backend{nullptr};
}  // namespace

void register_device_comm(const DeviceCommBackend& b) {
  g_backend.store(new DeviceCommBackend(b));  // once per process; never freed
}

const DeviceCommBackend* device_comm_backend() {
  return g_backend.load();
}

bool use_device_comm(CommBackend choice, const ExecContext& ctx, int64_t world_size) {
  const DeviceCommBackend* b = device_comm_backend();
  const bool on_gpu = !ctx.on_host();
  switch (choice) {
    case CommBackend::kMpi:
      if (on_gpu && world_size > 1) {
        throw Error(
            "parallel.comm = \"mpi\" cannot move device buffers: this rank computes on a GPU "
            "(train.device)",
            "use parallel.comm = \"nccl\" or \"auto\" for GPU ranks, or train.device = \"cpu\"");
      }
      return false;
    case CommBackend::kAuto:
      if (!on_gpu) return false;
      if (!b) {
        if (world_size == 1) return false;
        throw Error(
            "parallel.comm = \"auto\": this rank computes on a GPU but this build has no NCCL (the CUDA "
            "toolkit with NCCL was not found when it was built)",
            "build fluxtrain where the CUDA toolkit and NCCL are installed, or train on train.device = \"cpu\"");
      }
      return true;
    case CommBackend::kNccl:
      if (!b) {
        throw Error(
            "parallel.comm = \"nccl\": this build has no NCCL (the CUDA toolkit with NCCL was not found when "
            "it was built)",
            "use parallel.comm = \"mpi\" or \"auto\", or build where the CUDA toolkit and NCCL are installed");
      }
      if (!on_gpu && !b->host_memory_is_device) {
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

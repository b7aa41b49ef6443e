// NcclComm as parallel.comm's device transport (device_comm.h): the CUDA plugin's Backend carries
// it (plugin_entry.cpp passes nccl_transport() to register_cuda_backend). The stand-in test
// binaries, compiled with FT_NCCL_STANDIN=1 — fluxtrain-ncclsim, where "device" buffers are host
// memory, and fluxtrain-devemu-nccl, where they are the host-emulated GPU's (tests/ncclemu) —
// attach it to the CPU's Backend when the binary starts.
#include "backends/cuda/nccl_comm.h"
#include "parallel/comm/device_comm.h"

#ifndef FT_NCCL_STANDIN
#define FT_NCCL_STANDIN 0
#endif

#if FT_NCCL_STANDIN
#include "kernels/ops.h"
#include "tensor/backend.h"
#endif

namespace ft {

const DeviceCommBackend& nccl_transport() {
  static const DeviceCommBackend b{FT_NCCL_STANDIN ? "NCCL (host stand-in: tests only)" : "NCCL", &make_nccl_comm,
                                   FT_NCCL_STANDIN != 0};
  return b;
}

}  // namespace ft

#if FT_NCCL_STANDIN
namespace {

const bool g_registered = [] {
  const ft::Backend* now = ft::registered_backend(ft::Device::kCPU);
  ft::Backend cpu = now ? *now : ft::cpu_backend();
  cpu.comm = &ft::nccl_transport();
  ft::register_backend(cpu);
  return true;
}();

}  // namespace
#endif

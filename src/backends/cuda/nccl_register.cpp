// NcclComm as parallel.comm's device transport (device_comm.h): the CUDA plugin's Backend carries
// it (plugin_entry.cpp passes nccl_transport() to register_cuda_backend).
#include "backends/cuda/nccl_comm.h"
#include "parallel/comm/device_comm.h"

namespace ft {

const DeviceCommBackend& nccl_transport() {
  static const DeviceCommBackend b{"NCCL", &make_nccl_comm};
  return b;
}

}  // namespace ft

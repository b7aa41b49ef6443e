// Device communicators: the transport of device buffers (NCCL), part of a device's Backend
// (tensor/backend.h, Backend::comm), and chosen per run by parallel.comm. ft_parallel itself links
// no CUDA: the CUDA plugin's backend carries NcclComm when the build has NCCL
// (backends/cuda/nccl_register.cpp), the test binaries of tests/ncclemu and tests/vgpu attach the
// same NcclComm to their emulated or virtual GPU's backend, and a build without the toolkit has
// none ("nccl" is then an error naming why).
//
//   register_backend(Backend{..., .comm = &nccl_transport()});   // the backend's registration
//   mesh.use_comm(cfg.parallel, ctx);   // dp/tp/pp over NCCL where parallel.comm says so
#pragma once

#include <memory>
#include <string>

#include "parallel/comm/comm.h"
#include "parallel/comm/mpi_comm.h"
#include "parallel/parallel_config.h"
#include "tensor/exec_context.h"

namespace ft {

struct DeviceCommBackend {
  const char* name = nullptr;  // "NCCL"
  // A communicator over the same group as `host` (the axis' MPI communicator, or the size-1 one):
  // device buffers go over the device transport, bootstrapped through `host`; host buffers over
  // `host`. Collective over the group.
  std::shared_ptr<Communicator> (*make)(std::shared_ptr<Communicator> host, const ExecContext& compute,
                                        const CommOptions& opts) = nullptr;
};

// The transport of a registered backend (a device's before the host's), or null.
const DeviceCommBackend* device_comm_backend();

// Whether parallel.comm puts the mesh axes of a rank computing on ctx on the device transport:
//   "nccl"  yes; throws ft::Error (one line and a hint) in a build without NCCL, or on a CPU rank;
//   "auto"  on a GPU rank when the build has NCCL; otherwise MPI;
//   "mpi"   never: on a GPU rank, MPI moves device buffers staged through host memory
//           (host_staged_comm.h) — correct, not fast.
bool use_device_comm(CommBackend choice, const ExecContext& ctx);

}  // namespace ft

// Device communicators: the transport of device buffers (NCCL), registered by the binary that links
// one, and chosen per run by parallel.comm. ft_parallel itself links no CUDA: the real fluxtrain
// registers NCCL when the CUDA toolkit was found, the test binary fluxtrain-ncclsim registers the
// same NcclComm over the host stand-in of CUDA and NCCL (tests/ncclsim), and a build without the
// toolkit registers nothing ("nccl" is then an error naming why).
//
//   register_device_comm({"NCCL", &make_nccl_comm, false});       // once, at start-up
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
  // The test stand-in: its "device" is the host, so CPU contexts are accepted.
  bool host_memory_is_device = false;
};

void register_device_comm(const DeviceCommBackend& b);
// The registered backend, or null.
const DeviceCommBackend* device_comm_backend();

// Whether parallel.comm puts the mesh axes of a rank computing on ctx on the device transport:
//   "nccl"  yes; throws ft::Error (one line and a hint) in a build without NCCL, or on a CPU rank
//           (but for the test stand-in, whose device memory is the host's);
//   "auto"  on a GPU rank when the build has NCCL; otherwise MPI;
//   "mpi"   never: on a GPU rank, MPI moves device buffers staged through host memory
//           (host_staged_comm.h) — correct, not fast.
bool use_device_comm(CommBackend choice, const ExecContext& ctx);

}  // namespace ft

// HostStagedComm: a host transport (MPI) for ranks whose buffers live on a device that has no
// transport of its own in this build. Each buffer that is device memory (mem_on_device) goes
// through a host staging copy: device → host (mem_copy on the rank's context, then the host waits
// for it) before the collective starts, host → device when it is waited for. Host buffers (the
// step's scalars, strings) pass straight through. A group of one rank never stages: its
// collectives are device-to-device copies or nothing.
//
//   mesh.use_comm(cfg.parallel, ctx);   // parallel.comm = "mpi" (or "auto" without NCCL) on a
//                                       // device rank: HostStagedComm over every MPI group
//
// With NCCL (device buffers on the wire) only the world group, which stays on MPI, is wrapped.
// It is how the emulated GPU's tests (tests/devemu) run every parallel layout over MPI, and a
// fallback that is correct, not fast.
#pragma once

#include <memory>

#include "parallel/comm/comm.h"
#include "tensor/exec_context.h"

namespace ft {

std::shared_ptr<Communicator> make_host_staged_comm(std::shared_ptr<Communicator> transport, const ExecContext& ctx);

}  // namespace ft

// NcclComm: the Communicator of one mesh axis for device buffers, over NCCL.
//
// NCCL: through the table of nccl_api.h, loaded when the first NcclComm is made (CommError naming
// libnccl.so.2 when it cannot be). Closing: each communicator is finalised (ncclCommFinalize,
// polled, bounded by the collective timeout) before it is destroyed; one that fails is aborted.
//
// Bootstrap: group rank 0 makes the ncclUniqueId and broadcasts it over the axis' host
// communicator (MPI), then every member calls ncclCommInitRankConfig: one NCCL communicator per
// axis, nonblocking (blocking = 0: no NCCL call can hang the host). The initialisation is polled
// until ready, bounded by parallel.collective_timeout_s: past it the communicator is aborted and a
// CommError names the group and the ranks that never arrived (a board of who started it).
//
// Ordering: each NcclComm has its own communication stream. A collective is enqueued there after
// an event recorded on the compute stream (ExecContext::stream), so it reads what the compute
// stream wrote before the call and the host never waits to launch it. Timing events surround it
// on the communication stream; its Work is the second: wait() polls it (and ncclCommGetAsyncError)
// on the host; stream_wait(ctx) makes ctx's stream wait on it without blocking the host. Once it is
// seen finished (a wait, the watchdog, stats()) the time between its events counts in CommStats.
// bf16 / fp16 wire: fp32 data is converted on the communication stream (ops::to_bf16 / from_bf16,
// to_fp16 / from_fp16 into a scratch buffer) and reduced as ncclBfloat16 / ncclFloat16.
// Point-to-point: each send or receive is its own ncclGroupStart/End. NCCL has no tags and a
// stream runs in order, so a receive posted early would hold up every later transfer of its
// stream: with CommOptions::p2p_channels (the pp group) each direction of each link to a
// neighbouring rank has its own 2-rank NCCL communicator and stream per kind of transfer (even
// tags: activations; odd: gradients), in which both ends post in the same order (the schedules'
// order of micro-batches). Other transfers go on the group's own communicator and stream.
//
// Host buffers (a double on the stack, a std::vector) are not NCCL's: a call whose buffer is not
// the rank's device memory (mem_on_device: the backend's DeviceMemory::contains) goes to the host
// communicator instead.
//
// Hangs and deaths: a watchdog thread per communicator bounds every operation, whether anyone waits
// for it on the host or not, by parallel.collective_timeout_s from when its stream started it, and
// polls ncclCommGetAsyncError; on either the communicator is aborted (ncclCommAbort: a stream or
// host waiting on it wakes) and the failure — naming the collective, the group and the ranks that
// never arrived (the arrival board: a rank arrives at a collective when it has enqueued it), in
// MPI's format plus " over NCCL" — goes to report_comm_failure (comm.h), with which the train
// command ends the job. Every later call of this communicator fails with the same error.
//
// The compute context is a device's: a CPU one is an ft::Error (device_comm.h keeps CPU ranks on
// MPI). Without a GPU it runs on the host-emulated GPU's device buffers (tests/ncclemu) and on the
// virtual GPU's (tests/vgpu), over the NCCL stand-in of tests/ncclsim.
#pragma once

#include <memory>

#include "parallel/comm/comm.h"
#include "parallel/comm/mpi_comm.h"
#include "tensor/exec_context.h"

namespace ft {

// Collective over host's group. Throws CommError when NCCL or CUDA refuses (naming the call).
std::shared_ptr<Communicator> make_nccl_comm(std::shared_ptr<Communicator> host, const ExecContext& compute,
                                             const CommOptions& opts);

struct DeviceCommBackend;
// NcclComm as a backend's communicator transport (nccl_register.cpp).
const DeviceCommBackend& nccl_transport();

}  // namespace ft

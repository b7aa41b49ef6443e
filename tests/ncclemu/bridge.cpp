// Linked only into test binaries (fluxtrain-devemu-nccl, nccl_comm_test, nccl_watchdog_test,
// ncclemu_guard_test): the host-emulated GPU (tests/devemu) as Device::kCUDA, its Backend carrying
// NcclComm as parallel.comm's device transport (as the CUDA plugin's does), with the host stand-in
// of CUDA and NCCL (tests/ncclsim) behind NcclComm, joined here:
//   - an emulated op on a context whose stream the stand-in runs as a worker (NcclComm's
//     communication streams, once NCCL work was enqueued on them) is queued on that worker, in
//     order with the collectives around it (NcclComm's bf16 conversions); a copy or fill on such a
//     context first waits for the worker;
//   - the stand-in's workers touch emulated device memory only inside the arena's Access scope
//     (they stage through host buffers and never hold it while waiting for a peer);
//   - a released context's stream stops being a worker (its address may name a new context);
//   - the emulated allocator is stream-ordered as a GPU's (cudaMallocAsync on the compute stream):
//     the stand-in dies when NCCL work on a communication stream uses memory allocated after the
//     point that stream last waited for the compute stream.
// Everything else of the emulator is unchanged: host code that touches device memory still dies.
#include "arena.h"
#include "backends/cuda/nccl_comm.h"
#include "devemu.h"
#include "parallel/comm/device_comm.h"
#include "standin.h"
#include "tensor/backend.h"

namespace {

const ft::DeviceCommBackend g_transport{"NCCL (stand-in on the emulated GPU: tests only)", &ft::make_nccl_comm};

const bool registered = [] {
  ft::devemu::set_stream_hooks(
      {.queue = &ncclsim::queue_on_worker, .drain = &ncclsim::drain, .released = &ncclsim::forget_stream});
  ncclsim::set_memory_access([](const std::function<void()>& f) {
    ft::devemu::GuardedArena::Access open;
    f();
  });
  ncclsim::set_allocation_clock(&ft::devemu::allocation_clock, &ft::devemu::allocated_at);
  ft::devemu::register_emulated_gpu();
  ft::Backend gpu = *ft::registered_backend(ft::Device::kCUDA);
  gpu.comm = &g_transport;
  ft::register_backend(gpu);
  return true;
}();

}  // namespace

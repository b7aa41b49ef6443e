// What the host stand-in of CUDA and NCCL (cuda_standin.cpp, nccl_standin.cpp) offers a test binary
// besides the CUDA and NCCL functions: running beside another device stand-in, the host-emulated
// GPU (tests/devemu), whose ops run synchronously on the calling thread and whose memory is
// guarded. Used by tests/ncclemu's bridge.cpp (and, for check_ordered, tests/vgpu/nccl_hooks.cpp).
//
// Streams. A stream the stand-in made (cudaStreamCreate) is a worker thread. Any other token but
// the null stream is a foreign stream — the emulator's, whose work has finished when its call
// returns: an event recorded on it completes at once, a wait on it is the host's. A foreign stream
// becomes a worker the first time an NCCL operation is enqueued on it (NcclComm's communication
// streams: make_side_context's tokens), so collectives stay asynchronous and abortable:
//
//   ncclsim::queue_on_worker(token, f)   // false: token is no worker; else f runs there, in order
//   ncclsim::drain(token)                // the host waits for what is queued (nothing: not a worker)
//   ncclsim::forget_stream(token)        // the token's owner is gone: its worker drains and stops
//
// Memory. The stand-in's operations read and write the user's buffers only inside
// touch_memory(f), and never wait for a peer there (they stage through host buffers): the
// emulator's hook opens its arena around f.
#pragma once

#include <cstdint>
#include <functional>

namespace ncclsim {

bool queue_on_worker(const void* token, std::function<void()> f);
void drain(const void* token);
void forget_stream(const void* token);

// Makes `token` a worker stream unless it is one or the null stream (nccl_standin.cpp calls it
// before enqueueing on a stream).
void adopt_stream(const void* token);

// How the stand-in touches user buffers: access(f) must run f (default: it just does).
void set_memory_access(void (*access)(const std::function<void()>& f));
void touch_memory(const std::function<void()>& f);

// Stream-ordered allocation (cudaMallocAsync on the compute stream): clock() counts the device's
// allocations, allocated_at(p) is the count at which p's block was made (0: none). An event
// recorded on the host or a foreign stream carries clock() (that stream is ordered after every
// allocation so far), one recorded on a worker what the worker is ordered after; a stream that
// waits for it is ordered after that too. check_ordered(stream, p, call) — the NCCL stand-in's,
// for each buffer it enqueues on a worker — dies naming the call when p was allocated after the
// point its stream is ordered after. Without the hooks nothing is checked.
void set_allocation_clock(uint64_t (*clock)(), uint64_t (*allocated_at)(const void*));
// `write`: the operation writes p (its receive buffer), else reads it; `bytes`: how many from p
// (the virtual GPU's race check, tests/vgpu/nccl_hooks.cpp, uses both; the checks here do not).
void check_ordered(const void* stream, const void* p, const char* call, bool write = false, size_t bytes = 0);

}  // namespace ncclsim

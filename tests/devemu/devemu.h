// devemu: a host-emulated GPU registered as Device::kCUDA, for testing fluxtrain's device path on
// machines without one (`fluxtrain-devemu`, a test binary: the CLI plus this registration; never
// linked into `fluxtrain`). It registers a Backend (tensor/backend.h) as a real backend does:
//   - an OpTable whose ops run the CPU kernels (so losses are bit-identical to the CPU binary's),
//     each checking that every pointer it is given lies in device memory and that its context is
//     one the runtime made;
//   - a DeviceMemory over a GuardedArena (arena.h): PROT_NONE except while an emulated op, copy or
//     fill runs, so host code that touches device memory directly dies with SIGSEGV; its size is
//     FT_DEVEMU_BYTES (default 2 GiB), so out-of-memory can be tested;
//   - a DeviceRuntime: FT_DEVEMU_DEVICES devices (default 1), contexts with distinct stream tokens;
//     everything runs in call order, so stream_wait and synchronize have nothing to wait for;
//   - "auto" precision by the CUDA rule on compute capability FT_DEVEMU_CC (default 9.0: bf16;
//     "7.5": fp32), as the CUDA backend reads it from the device.
// FT_DEVEMU_STATS=FILE writes, at exit, a JSON object counting the host<->device copies (calls and
// bytes each way), ops (and those a hook queued on another stream), fills and the contexts each
// device was used from: the tests read it to show that the host only feeds token batches and reads
// back scalars.
//
// This emulates a GPU to test fluxtrain's host logic (where data lives, what the host touches,
// what crosses the bus); it does not test CUDA, its kernels, its streams or its timing.
#pragma once

#include <cstdint>
#include <functional>

namespace ft::devemu {

// Registers the emulated GPU for Device::kCUDA (idempotent). fluxtrain-devemu calls it from a
// static initializer; tests may call it directly.
void register_emulated_gpu();

// For a test binary that runs another stand-in's asynchronous streams beside the emulator
// (tests/ncclemu: the NCCL stand-in's worker streams behind NcclComm's communication contexts).
// A stream token is what ExecContext::stream points at. Every hook may be null.
struct StreamHooks {
  // An op issued on a context whose stream is `token`: return true when `run` was queued to run
  // later, in order with that stream's other work (the op's arguments were checked already);
  // false: it runs now, on the calling thread.
  bool (*queue)(const void* token, std::function<void()> run) = nullptr;
  // Before a copy or fill on `token` runs (synchronously): what is queued on it has finished.
  void (*drain)(const void* token) = nullptr;
  // The last copy of the context that owns `token` is gone (called from the thread dropping it).
  void (*released)(const void* token) = nullptr;
};
// Installs the hooks (once, before the first context is made).
void set_stream_hooks(const StreamHooks& hooks);

// The allocator as a GPU's stream-ordered one (cudaMallocAsync on the device's first stream, the
// rank's compute stream) sees it: a block is usable on another stream only once that stream was
// ordered after the compute stream at a point after the allocation. allocation_clock() counts the
// allocations so far; allocated_at(p) is the count at which the live block holding p was made (0:
// p is in no live block). The NCCL stand-in checks its buffers against them (tests/ncclemu).
uint64_t allocation_clock();
uint64_t allocated_at(const void* p);

}  // namespace ft::devemu

// DeviceRuntime: what a device's backend provides besides its ops and its memory — how many of
// its devices the process sees, the rank's context on one of them (a stream and library handles),
// more streams on the same device, ordering between streams, and waiting for one.
//
//   ExecContext ctx = make_exec_context(Device::kCUDA, local_rank % device_count(Device::kCUDA));
//   ExecContext side = make_side_context(ctx);   // e.g. checkpoint copies, communication
//   stream_wait(side, ctx);     // what is queued on side from now on runs after ctx's work so far
//   synchronize(side);          // the host waits for side's work
//
// The CPU's runtime is built in: one device, every context is the host, everything runs in call
// order, so side contexts are the host too and the waits do nothing. A device's runtime is part of
// its Backend (tensor/backend.h), registered once beside its ops and its memory. A context owns its stream and handles
// through ExecContext::owner: they live while a copy of the context does.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "tensor/device.h"
#include "tensor/exec_context.h"

namespace ft {

// A device's memory as its driver reports it now (DeviceRuntime::memory_info).
struct DeviceMemoryInfo {
  size_t free = 0, total = 0;  // bytes
  std::string name;            // e.g. "NVIDIA H200"
};

struct DeviceRuntime {
  // Devices of this kind the process sees (after CUDA_VISIBLE_DEVICES); 0 when none is usable.
  int (*device_count)() = nullptr;
  // Why none is usable, e.g. "cudaGetDeviceCount: no CUDA-capable device is detected"; "" when
  // one is.
  std::string (*unavailable_reason)() = nullptr;
  // The context of device `index` (0 <= index < device_count()): its own stream and handles.
  ExecContext (*make_context)(int index) = nullptr;
  // A context on ctx's device with another stream (same library handles allowed).
  ExecContext (*make_side_context)(const ExecContext& ctx) = nullptr;
  // Work queued on `waiter` after this call runs after all work queued on `on` before it; the
  // host does not wait.
  void (*stream_wait)(const ExecContext& waiter, const ExecContext& on) = nullptr;
  // The host waits until all work queued on ctx has finished; throws ft::Error on a device fault.
  void (*synchronize)(const ExecContext& ctx) = nullptr;
  // Timing marks on a stream (tensor/stream_timer.h): record_mark records one on ctx's stream —
  // into `mark` when it is one this runtime made before, else a new one — and returns it;
  // mark_seconds is the time between two marks of one stream once the stream has reached both
  // (-1 before); free_mark releases one. A runtime whose streams run in call order (the CPU's, the
  // test emulator's) leaves them null: the host clock is then the stream's.
  void* (*record_mark)(const ExecContext& ctx, void* mark) = nullptr;
  double (*mark_seconds)(void* from, void* to) = nullptr;
  void (*free_mark)(void* mark) = nullptr;
  // Free and total memory of device `index` and its name (cudaMemGetInfo); false when the driver
  // cannot say. Null: unknown (the start-up memory check, dryrun/memory_check.h, then skips it).
  bool (*memory_info)(int index, DeviceMemoryInfo* out) = nullptr;
  // Graphs (tensor/device_graph.h): begin_capture starts recording what the calling thread queues
  // on ctx's stream instead of running it; end_capture stops and returns the executable graph, or
  // throws ft::Error naming the call that broke the capture (a host synchronisation, a copy the
  // host reads, work on another stream); replay_graph queues the whole recording on ctx's stream
  // again, with the pointers and values it was recorded with; free_graph releases one. Null: the
  // device cannot capture (the CPU).
  void (*begin_capture)(const ExecContext& ctx) = nullptr;
  void* (*end_capture)(const ExecContext& ctx) = nullptr;
  void (*replay_graph)(void* graph, const ExecContext& ctx) = nullptr;
  void (*free_graph)(void* graph) = nullptr;
};

// Whether d has a runtime: the CPU always; another kind when its backend (tensor/backend.h) is
// registered, its plugin loaded first.
bool device_runtime_registered(Device d);

// 1 for the CPU; a registered backend's count; 0 when this build has no runtime for d.
int device_count(Device d);
// Why d cannot be used here ("" when it can): no backend in this build, no driver, no device.
std::string device_unavailable_reason(Device d);
// The context of device `index` of kind d (the device alone on the CPU; a stream and the backend's
// per-context state elsewhere): the one way to make a context. ft::Error naming the device and why
// when it cannot be made (no backend in this build, its plugin failed to load, index out of range,
// the backend's own error).
ExecContext make_exec_context(Device d, int index = 0);
// train.device / --device: "cpu", "cuda" or "auto" (a GPU when this build has the CUDA backend and
// one is visible, else the CPU). ft::Error naming `what` (the key) for any other name.
Device resolve_device(const std::string& name, const char* what = "train.device");
// The same check without resolving "auto" (loads nothing): the config's validation.
void check_device_name(const std::string& name, const char* what = "train.device");
ExecContext make_side_context(const ExecContext& ctx);
void stream_wait(const ExecContext& waiter, const ExecContext& on);
void synchronize(const ExecContext& ctx);
// Device `index` of kind d's memory and name; nullopt for the CPU, a kind without a runtime or one
// that cannot say (DeviceRuntime::memory_info).
std::optional<DeviceMemoryInfo> device_memory_info(Device d, int index);
// ctx's runtime when it times streams with marks, else null (the host clock times them).
const DeviceRuntime* stream_mark_runtime(const ExecContext& ctx);
// ctx's runtime when it captures graphs (DeviceRuntime::begin_capture), else null (the CPU).
const DeviceRuntime* graph_runtime(const ExecContext& ctx);

}  // namespace ft

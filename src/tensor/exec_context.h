// ExecContext: where an op runs — the one argument every op and every device-aware memory call
// takes first, so that a second backend is a matter of dispatch, not of signatures.
//
//   ops::rmsnorm_forward(ctx, out, rstd, x, w, N, C, eps);   // runs on ctx.device
//   mem_copy(ctx, dst, Device::kCUDA, src, Device::kCPU, bytes);   // ordered on ctx's stream
//
// On the CPU the context carries nothing but the device. A GPU context also names the GPU
// (device index), the stream every op of the rank is enqueued on, and the backend's own
// per-context state (for CUDA: its cuBLASLt and cuDNN handles, workspaces); they are opaque
// pointers here so that no header below the CUDA backend includes CUDA. A context is made once per rank (train/) and
// passed down; it is not global state. Streams and contexts: tensor/device_runtime.h.
#pragma once

#include <memory>

#include "tensor/device.h"

namespace ft {

struct ExecContext {
  Device device = Device::kCPU;
  int device_index = 0;     // which GPU of the node (CUDA only)
  void* stream = nullptr;   // cudaStream_t (CUDA only)
  void* backend = nullptr;  // the backend's own per-context state (library handles, workspaces)
  // Keeps the stream and the state above alive while a copy of the context exists (the
  // backend's, made by make_exec_context; null on the CPU).
  std::shared_ptr<void> owner{};

  bool on_host() const { return device == Device::kCPU; }
};

// The CPU context (immutable; a value, not shared state).
inline const ExecContext& cpu_context() {
  static const ExecContext ctx{};
  return ctx;
}

}  // namespace ft

// DeviceGraph: a recording of the work one thread queued on a context's stream (a CUDA graph),
// replayed later as one launch — the device does the same work with the same pointers and the
// same by-value arguments, and the host issues none of it again. Only work that depends on
// nothing the host does between replays may be recorded: the host must not read or write device
// memory, synchronise, allocate or queue on another stream inside the capture (the device's
// runtime refuses it: capture() throws ft::Error naming the call).
//
//   if (graphs_supported(ctx)) {
//     DeviceGraph g = DeviceGraph::capture(ctx, [&] { queue_the_step(); });   // nothing ran yet
//     g.replay(ctx);    // runs it; each later replay reads the inputs' buffers again
//   }
#pragma once

#include <functional>

#include "tensor/exec_context.h"

namespace ft {

// Whether ctx's device records graphs (a GPU's runtime with begin_capture; never the CPU).
bool graphs_supported(const ExecContext& ctx);

class DeviceGraph {
 public:
  DeviceGraph() = default;
  ~DeviceGraph();
  DeviceGraph(DeviceGraph&& o) noexcept;
  DeviceGraph& operator=(DeviceGraph&& o) noexcept;
  DeviceGraph(const DeviceGraph&) = delete;
  DeviceGraph& operator=(const DeviceGraph&) = delete;

  // Records what `queue` queues on ctx's stream (it runs nothing on the device). When `queue`
  // throws or the capture breaks, the capture is ended and the error passed on (ft::Error naming
  // the call that broke it); the stream is then usable as before.
  static DeviceGraph capture(const ExecContext& ctx, const std::function<void()>& queue);

  bool empty() const { return graph_ == nullptr; }
  // Queues the recording on ctx's stream (the context it was captured on, or one on its device).
  void replay(const ExecContext& ctx) const;

 private:
  ExecContext ctx_;
  void* graph_ = nullptr;  // the runtime's executable graph
};

}  // namespace ft

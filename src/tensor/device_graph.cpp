#include "tensor/device_graph.h"

#include <utility>

#include "tensor/device_runtime.h"
#include "util/error.h"

namespace ft {

bool graphs_supported(const ExecContext& ctx) {
  return graph_runtime(ctx) != nullptr;
}

DeviceGraph::~DeviceGraph() {
  if (graph_) graph_runtime(ctx_)->free_graph(graph_);
}

DeviceGraph::DeviceGraph(DeviceGraph&& o) noexcept
    : ctx_(std::move(o.ctx_)), graph_(std::exchange(o.graph_, nullptr)) {}

DeviceGraph& DeviceGraph::operator=(DeviceGraph&& o) noexcept {
  if (this != &o) {
    if (graph_) graph_runtime(ctx_)->free_graph(graph_);
    ctx_ = std::move(o.ctx_);
    graph_ = std::exchange(o.graph_, nullptr);
  }
  return *this;
}

DeviceGraph DeviceGraph::capture(const ExecContext& ctx, const std::function<void()>& queue) {
  const DeviceRuntime* rt = graph_runtime(ctx);
  FT_CHECK(rt, "graph capture on {}, whose runtime records no graphs", device_name(ctx.device));
  rt->begin_capture(ctx);
  try {
    queue();
  } catch (...) {
    // The capture is over either way; the error that broke it is the one to report (the one
    // end_capture would repeat is the same or a consequence).
    try {
      if (void* g = rt->end_capture(ctx)) rt->free_graph(g);
    } catch (...) {
    }
    throw;
  }
  DeviceGraph g;
  g.ctx_ = ctx;
  g.graph_ = rt->end_capture(ctx);
  return g;
}

void DeviceGraph::replay(const ExecContext& ctx) const {
  FT_CHECK(graph_, "replay of an empty graph");
  graph_runtime(ctx_)->replay_graph(graph_, ctx);
}

}  // namespace ft

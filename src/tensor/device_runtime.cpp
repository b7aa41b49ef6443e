#include "tensor/device_runtime.h"

#include "tensor/backend.h"
#include "tensor/device_flag_hint.h"
#include "util/error.h"

namespace ft {
namespace {

// The runtime of a non-CPU device's backend (its plugin loaded first), or null.
const DeviceRuntime* runtime_of(Device d) {
  const Backend* b = find_backend(d);
  return b && b->runtime.device_count ? &b->runtime : nullptr;
}

}  // namespace

bool device_runtime_registered(Device d) {
  return d == Device::kCPU || runtime_of(d) != nullptr;
}

int device_count(Device d) {
  if (d == Device::kCPU) return 1;
  const DeviceRuntime* rt = runtime_of(d);
  return rt ? rt->device_count() : 0;
}

std::string device_unavailable_reason(Device d) {
  if (d == Device::kCPU) return "";
  const DeviceRuntime* rt = runtime_of(d);
  // A registered runtime wins over its loader's error (a test binary registers its own).
  if (!rt) {
    const DeviceLoadResult& loaded = load_device(d);
    return loaded.error.empty() ? fmt::format("this build of fluxtrain has no {} backend", device_name(d))
                                : loaded.error;
  }
  if (rt->device_count() > 0) return "";
  const std::string why = rt->unavailable_reason ? rt->unavailable_reason() : "";
  return why.empty() ? fmt::format("no {} device is visible", device_name(d)) : why;
}

ExecContext make_exec_context(Device d, int index) {
  if (d == Device::kCPU) return ExecContext{};
  // A backend loaded on first use that could not be loaded says why below; one without ops (or
  // none at all) says which devices this process has.
  if (const Backend* b = find_backend(d); load_device(d).error.empty() && (b == nullptr || b->ops == nullptr))
    throw Error(fmt::format("device {}: this build has no backend for it (it has: {})", device_name(d),
                            registered_backend_names()),
                "train.device = \"cpu\" runs on this machine's CPUs");
  const std::string why = device_unavailable_reason(d);
  if (!why.empty()) {
    const DeviceLoadResult& loaded = load_device(d);
    const bool load_failed = !loaded.error.empty() && runtime_of(d) == nullptr;
    throw Error(fmt::format("device {}: {}", device_name(d), why),
                load_failed && !loaded.hint.empty()
                    ? loaded.hint
                    : "train.device = \"cpu\" runs on this machine's CPUs; \"auto\" picks a GPU when one is visible");
  }
  const int n = device_count(d);
  if (index < 0 || index >= n)
    throw Error(fmt::format("device {}:{}: out of range, this process sees {} such device{}", device_name(d), index, n,
                            n == 1 ? "" : "s"),
                "one rank per GPU: the rank's GPU is its local rank modulo the visible GPUs (CUDA_VISIBLE_DEVICES)");
  return runtime_of(d)->make_context(index);
}

std::optional<DeviceMemoryInfo> device_memory_info(Device d, int index) {
  if (d == Device::kCPU || device_count(d) <= index) return std::nullopt;
  const DeviceRuntime* rt = runtime_of(d);
  DeviceMemoryInfo info;
  if (!rt || !rt->memory_info || !rt->memory_info(index, &info)) return std::nullopt;
  return info;
}

ExecContext make_side_context(const ExecContext& ctx) {
  if (ctx.on_host()) return ctx;
  const DeviceRuntime* rt = runtime_of(ctx.device);
  FT_CHECK(rt, "make_side_context: no runtime for {}", device_name(ctx.device));
  return rt->make_side_context ? rt->make_side_context(ctx) : ctx;
}

void stream_wait(const ExecContext& waiter, const ExecContext& on) {
  if (on.on_host()) return;  // host work is done when it returns: nothing to wait for
  const Device d = waiter.on_host() ? on.device : waiter.device;
  const DeviceRuntime* rt = runtime_of(d);
  FT_CHECK(rt, "stream_wait: no runtime for {}", device_name(d));
  if (waiter.on_host()) {
    rt->synchronize(on);  // the host "stream" waits by blocking
  } else if (rt->stream_wait) {
    rt->stream_wait(waiter, on);
  } else {
    rt->synchronize(on);
  }
}

void synchronize(const ExecContext& ctx) {
  if (ctx.on_host()) return;
  const DeviceRuntime* rt = runtime_of(ctx.device);
  FT_CHECK(rt, "synchronize: no runtime for {}", device_name(ctx.device));
  rt->synchronize(ctx);
}

const DeviceRuntime* stream_mark_runtime(const ExecContext& ctx) {
  if (ctx.on_host()) return nullptr;
  const DeviceRuntime* rt = runtime_of(ctx.device);
  return rt && rt->record_mark && rt->mark_seconds && rt->free_mark ? rt : nullptr;
}

const DeviceRuntime* graph_runtime(const ExecContext& ctx) {
  if (ctx.on_host()) return nullptr;
  const DeviceRuntime* rt = runtime_of(ctx.device);
  return rt && rt->begin_capture && rt->end_capture && rt->replay_graph && rt->free_graph ? rt : nullptr;
}

}  // namespace ft

namespace ft {

Error device_error_for_flag(const Error& e, const std::string& flag) {
  std::string hint = e.hint();
  const std::string key = "train.device = \"";
  for (size_t at = hint.find(key); at != std::string::npos; at = hint.find(key, at)) {
    // train.device = "cpu" -> --device cpu; a "set " before it becomes "pass ".
    const size_t end = hint.find('"', at + key.size());
    if (end == std::string::npos) break;
    const std::string value = hint.substr(at + key.size(), end - at - key.size());
    size_t from = at;
    std::string verb;
    if (at >= 4 && hint.compare(at - 4, 4, "set ") == 0) from = at - 4, verb = "pass ";
    const std::string with = verb + flag + " " + value;
    hint.replace(from, end + 1 - from, with);
    at = from + with.size();
  }
  return Error(e.what(), hint);
}

void check_device_name(const std::string& name, const char* what) {
  if (name == "auto") return;
  for (size_t i = 0; i < kNumDevices; ++i)
    if (name == device_name(static_cast<Device>(i))) return;
  const std::string msg =
      fmt::format("{} = \"{}\" is not a device fluxtrain knows: expected \"cpu\", \"cuda\" or \"auto\"", what, name);
  if (what[0] == '-') throw Error(msg, fmt::format("pass {} cpu, {} cuda or {} auto (the default)", what, what, what));
  throw Error(msg, "set train.device = \"cpu\" (the default)");
}

Device resolve_device(const std::string& name, const char* what) {
  check_device_name(name, what);
  if (name == "auto") return device_count(Device::kCUDA) > 0 ? Device::kCUDA : Device::kCPU;
  for (size_t i = 0; i < kNumDevices; ++i)
    if (name == device_name(static_cast<Device>(i))) return static_cast<Device>(i);
  return Device::kCPU;  // not reached: checked above
}

}  // namespace ft

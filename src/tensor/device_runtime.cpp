#include "tensor/device_runtime.h"

#include <array>
#include <mutex>

#include "util/error.h"

namespace ft {
namespace {

std::mutex g_mu;
std::array<DeviceRuntime, kNumDevices> g_runtimes{};
std::array<bool, kNumDevices> g_registered{};

// Loaders of backends loaded on first use, each run at most once (under its own once_flag: the
// loader registers the runtime, which takes g_mu).
struct Loader {
  DeviceLoadResult (*load)() = nullptr;
  std::once_flag once;
  DeviceLoadResult result;
};
std::array<Loader, kNumDevices> g_loaders{};

size_t slot(Device d) {
  const auto i = static_cast<size_t>(d);
  FT_CHECK(i < kNumDevices, "device {} has no slot", i);
  return i;
}

// The registered runtime of a non-CPU device, or null (its loader run first).
const DeviceRuntime* runtime_of(Device d) {
  load_device(d);
  std::lock_guard<std::mutex> lock(g_mu);
  return g_registered[slot(d)] ? &g_runtimes[slot(d)] : nullptr;
}

}  // namespace

void register_device_runtime(Device d, const DeviceRuntime& rt) {
  FT_CHECK(d != Device::kCPU, "the CPU's runtime is built in");
  FT_CHECK(rt.device_count && rt.make_context && rt.synchronize, "register_device_runtime({}): incomplete runtime",
           device_name(d));
  std::lock_guard<std::mutex> lock(g_mu);
  g_runtimes[slot(d)] = rt;
  g_registered[slot(d)] = true;
}

void register_device_loader(Device d, DeviceLoadResult (*load)()) {
  FT_CHECK(d != Device::kCPU, "the CPU's backend is built in");
  g_loaders[slot(d)].load = load;
}

const DeviceLoadResult& load_device(Device d) {
  Loader& l = g_loaders[slot(d)];
  std::call_once(l.once, [&l] {
    if (l.load) l.result = l.load();
  });
  return l.result;
}

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

ExecContext make_device_context(Device d, int index) {
  if (d == Device::kCPU) return ExecContext{};
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

}  // namespace ft

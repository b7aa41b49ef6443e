// The registry of backends: one OpTable per device (kernels/ops.h). The CPU's is there from the
// start (constant-initialised: ops may run from any static initialiser); others register.
#include <string>

#include "kernels/ops.h"
#include "tensor/device_runtime.h"
#include "util/error.h"

namespace ft {
namespace detail {

std::atomic<const OpTable*> g_backends[kBackendSlots] = {&cpu::kOpTable, nullptr};

namespace {
// "cpu", "cpu, cuda": the devices this process has a backend for.
std::string registered() {
  std::string s;
  for (size_t d = 0; d < kBackendSlots; ++d)
    if (g_backends[d].load()) s += (s.empty() ? "" : ", ") + std::string(device_name(static_cast<Device>(d)));
  return s;
}
}  // namespace

void no_backend(Device device, OpId op) {
  throw Error(fmt::format("op {} on device {}: no backend runs ops there (this process has: {})", op_name(op),
                          device_name(device), registered()),
              "the ExecContext names the device an op runs on; make it with make_exec_context() for a device "
              "this build supports (train.device)");
}

}  // namespace detail

void register_backend(Device device, const OpTable* table) {
  const auto d = static_cast<size_t>(device);
  FT_CHECK(d < detail::kBackendSlots, "register_backend: device {} has no slot", d);
  detail::g_backends[d].store(table, std::memory_order_release);
}

const OpTable* find_backend(Device device) {
  const auto d = static_cast<size_t>(device);
  return d < detail::kBackendSlots ? detail::g_backends[d].load(std::memory_order_acquire) : nullptr;
}

ExecContext make_exec_context(Device device, int index) {
  // A backend loaded on first use (the CUDA plugin) that could not be loaded: say why.
  if (device != Device::kCPU && !load_device(device).error.empty()) return make_device_context(device, index);
  if (!find_backend(device))
    throw Error(fmt::format("device {}: this build has no backend for it (it has: {})", device_name(device),
                            detail::registered()),
                "train.device = \"cpu\" runs on this machine's CPUs");
  return make_device_context(device, index);
}

}  // namespace ft

// Op dispatch's slow path and the CPU's registration: the CPU's Backend (backends/cpu) is built
// in and registered before main (or by the first op that runs in an earlier static initialiser).
#include <string>

#include "kernels/ops.h"
#include "tensor/backend.h"
#include "util/error.h"

namespace ft {
namespace {

// Once, unless a static initialiser that ran first registered it already.
void register_cpu() {
  static const bool once = registered_backend(Device::kCPU) || (register_backend(cpu_backend()), true);
  (void)once;
}
const bool g_cpu_registered = (register_cpu(), true);

}  // namespace

namespace detail {

const OpTable& op_table_slow(Device device, OpId op) {
  if (device == Device::kCPU && registered_backend(Device::kCPU) == nullptr) {
    register_cpu();
    return *cpu_backend().ops;
  }
  throw Error(fmt::format("op {} on device {}: no backend runs ops there (this process has: {})", op_name(op),
                          device_name(device), registered_backend_names()),
              "the ExecContext names the device an op runs on; make it with make_exec_context() for a device "
              "this build supports (train.device)");
}

}  // namespace detail

const Backend& backend_of(const ExecContext& ctx) {
  if (ctx.on_host()) register_cpu();
  const Backend* b = find_backend(ctx.device);
  if (b == nullptr)
    throw Error(fmt::format("device {}: this build has no backend for it (it has: {})", device_name(ctx.device),
                            registered_backend_names()),
                "train.device = \"cpu\" runs on this machine's CPUs");
  return *b;
}

}  // namespace ft

// The CPU backend's OpTable: every op of the list (kernels/op_decls.inc), filled from the list, so
// an op without a CPU version fails to link. A constant: the registry (kernels/op_dispatch.cpp) holds
// it for Device::kCPU before any code runs.
#include "kernels/ops.h"

namespace ft::cpu {
namespace {

constexpr OpTable make_table() {
  OpTable t;
  t.backend = "cpu";
#define FT_OP(name, params, args) t.name = &name;
#include "kernels/op_decls.inc"
#undef FT_OP
  return t;
}

}  // namespace

constinit const OpTable kOpTable = make_table();

}  // namespace ft::cpu

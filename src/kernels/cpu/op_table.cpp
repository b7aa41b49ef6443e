// The CPU backend's OpTable: every op of the list (kernels/op_decls.inc), filled from the list, so
// an op without a CPU version fails to link.
#include "kernels/ops.h"

namespace ft::cpu {

const OpTable& op_table() {
  static const OpTable table = [] {
    OpTable t;
    t.backend = "cpu";
#define FT_OP(name, params, args) t.name = &name;
#include "kernels/op_decls.inc"
#undef FT_OP
    return t;
  }();
  return table;
}

}  // namespace ft::cpu

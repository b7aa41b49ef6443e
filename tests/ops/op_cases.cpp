// The op harness's table, expanded from kernels/op_decls.inc like the rest of the op list: one row
// per op, in the list's order. An op without its row (rows::name(), defined in tests/ops/rows_*.cpp)
// fails to link, naming the op; the ctest test ops_missing_row_fails_to_build proves it.
#include "ops/op_cases.h"

namespace ft::test {
namespace {

constexpr OpRow kOpRows[] = {
#define FT_OP(name, params, args) {OpId::name, &rows::name},
#include "kernels/op_decls.inc"
#undef FT_OP
};

constexpr bool rows_in_op_order() {
  if (std::size(kOpRows) != kOpCount) return false;
  for (size_t i = 0; i < kOpCount; ++i)
    if (kOpRows[i].id != static_cast<OpId>(i)) return false;
  return true;
}
static_assert(rows_in_op_order(), "row i of kOpRows is op i of kernels/op_decls.inc");

}  // namespace

std::span<const OpRow> op_rows() {
  return kOpRows;
}

const OpCase& op_case(OpId id) {
  return kOpRows[static_cast<size_t>(id)].row();
}

}  // namespace ft::test

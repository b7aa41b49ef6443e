// The op harness's table: one row per op of kernels/op_decls.inc, in OpId order (op_cases.cpp
// checks it at compile time). The unit tests (tests/unit/kernels_ops_test.cpp) run every row
// against the reference and every backward row against float64 finite differences
// (op_checks.h); the op bench (bench/ops_bench.cpp) times every row against the machine's peak.
//
//   for (const OpRow& r : op_rows()) { const OpCase& c = r.row(); ... c.test_shapes() ... }
//   const OpCase& rms = op_case(OpId::rmsnorm_forward);
#pragma once

#include <span>

#include "ops/op_case.h"

namespace ft::test {

struct OpRow {
  OpId id;
  const OpCase& (*row)();
};

// Every row, row i for OpId i.
std::span<const OpRow> op_rows();
const OpCase& op_case(OpId id);

// The rows themselves (tests/ops/rows_*.cpp), one function per op of the list.
namespace rows {
#define FT_OP(name, params, args) const OpCase& name();
#include "kernels/op_decls.inc"
#undef FT_OP
}  // namespace rows

}  // namespace ft::test

// The checks the op harness runs on a row (op_cases.h), for any backend's OpTable: against the
// reference, run twice, and (backward rows) against float64 finite differences. Each returns ""
// when the check passes, else what failed, one line per output. The tests wrap them in GoogleTest
// (tests/unit/kernels_ops_test.cpp); a backend's own checks may call them directly. On a device
// the host cannot address (ctx not on the host), the case's buffers are staged through device
// memory around each run of `ops` (op_staging.h).
//
//   std::string e = check_against_reference(op_case(OpId::swiglu_forward), shape, cpu::op_table(), ctx);
#pragma once

#include <string>

#include "ops/op_case.h"

namespace ft::test {

// The case of `s` through `ops` on ctx and through the reference (ref::op_table() on the CPU):
// every output within the row's tolerance of the reference's.
std::string check_against_reference(const OpCase& row, const Shape& s, const OpTable& ops, const ExecContext& ctx,
                                    uint64_t seed = 1);
// The case run twice from the same inputs gives the same bits (no order that changes between runs).
std::string check_repeatable(const OpCase& row, const Shape& s, const OpTable& ops, const ExecContext& ctx,
                             uint64_t seed = 1);
// Backward rows: each gradient of row.grads() as `ops` computes it against central differences of
// row.loss64 in float64 (row.grad_tol()), and row.backward64 — the reference templates in float64
// — against the same differences at 1e-6.
std::string check_gradients(const OpCase& row, const Shape& s, const OpTable& ops, const ExecContext& ctx,
                            uint64_t seed = 1);

}  // namespace ft::test

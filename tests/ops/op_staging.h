// Running a row of the op harness on a device whose memory the host cannot address (a GPU): the
// case's buffers live on the host (op_case.h), so they are copied to device memory around the
// run, and the row's op is called through a table that maps each host pointer of the case to its
// device copy (an offset into a buffer maps to the same offset into the copy).
//
//   Case got = row.make(shape, seed);
//   run_case(row, cuda::op_table(), ctx, got);   // on a GPU: staged; on the host: row.run
#pragma once

#include "ops/op_case.h"

namespace ft::test {

// row.run on the host; on another device, run_case_staged.
void run_case(const OpCase& row, const OpTable& ops, const ExecContext& ctx, Case& c);
// Every buffer of c copied into memory of ctx.device (mem_alloc, mem_copy), the op run there
// through `ops`, the outputs copied back, the copies freed. A pointer the row passes that is not
// in one of c's buffers is an ft::Error (the op would read host memory on the device).
void run_case_staged(const OpCase& row, const OpTable& ops, const ExecContext& ctx, Case& c);

}  // namespace ft::test

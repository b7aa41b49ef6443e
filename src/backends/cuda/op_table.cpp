// The CUDA backend's OpTable: one entry per op of kernels/op_decls.inc, filled from the list as
// cpu/op_table.cpp fills the CPU's — an op without a CUDA version fails to link. Each entry finds
// the CudaContext in the ExecContext (context_of: also the calling thread's current device), runs
// the op on it and, under FT_CUDA_SYNC_CHECK=1, waits for the stream so a fault is reported by
// the op that caused it, by name.
#include "backends/cuda/context.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_ops.h"

namespace ft::cuda {

namespace {
void after_op(CudaContext& c, const char* op) {
  if (c.sync_check())
    FT_CUDA_CHECK(cudaStreamSynchronize(c.stream()), op, {"device", c.device()});  // names the op on a fault
}
}  // namespace

#define FT_OP(name, params, args)                           \
  void name(const ExecContext& ctx, FT_OP_UNPAREN params) { \
    CudaContext& cuda_ctx = context_of(ctx, #name);         \
    name(cuda_ctx, FT_OP_UNPAREN args);                     \
    after_op(cuda_ctx, #name);                              \
  }
#include "kernels/op_decls.inc"
#undef FT_OP

const OpTable& op_table() {
  static const OpTable table = [] {
    OpTable t;
    t.backend = "cuda";
#define FT_OP(name, params, args) t.name = &name;
#include "kernels/op_decls.inc"
#undef FT_OP
    return t;
  }();
  return table;
}

}  // namespace ft::cuda

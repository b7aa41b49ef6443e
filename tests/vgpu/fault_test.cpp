// Proof that the virtual GPU's checks fire: kernels built with FT_VGPU_FAULTS carry planted faults
// (off unless a test sets them, vgpu/faults.h), and each death test below runs an op with one on
// and expects the process to die with the executor's report — a race naming the kernel, the block
// and both threads; a wrong result; a bounds error naming the kernel and the extra block.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "backends/cuda/context.h"
#include "backends/cuda/cuda_ops.h"
#include "ops/op_cases.h"
#include "vgpu/cuda_sim.h"

namespace ft::test {
namespace {

// The row on its shape through the CUDA table with `fault` set; dies printing the executor's error
// or the difference from the reference; returns when the op ran and matched.
void run_with_fault(OpId id, const Shape& s, const char* fault, int value) {
  vgpu::set_fault(fault, value);
  const OpCase& row = op_case(id);
  const Case before = row.make(s, 1);
  Case want = before, got = before;
  row.run(ref::op_table(), cpu_context(), want);
  cuda::CudaContext cuda(0);
  ExecContext ctx;
  ctx.backend = &cuda;
  for (Buffer& b : got.buffers()) vgpu::register_memory(b.data.data(), b.data.size(), b.name.c_str());
  try {
    row.run(cuda::op_table(), ctx, got);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vgpu error: %s\n", e.what());
    std::abort();
  }
  const std::string diff = row.compare(before, got, want);
  if (!diff.empty()) {
    std::fprintf(stderr, "wrong result: %s\n", diff.c_str());
    std::abort();
  }
  for (Buffer& b : got.buffers()) vgpu::unregister_memory(b.data.data());
}

const Shape kAttention{{"B", 1}, {"T", 40}, {"H", 2}, {"Hkv", 1}, {"D", 16}, {"amp", 1}};
const Shape kRms{{"N", 40}, {"C", 24}, {"res", 0}};  // 3 chunks of 16 rows

TEST(VgpuFaults, CleanRunsPass) {
  run_with_fault(OpId::attention_forward, kAttention, "attention_fwd_no_sync", 0);
  run_with_fault(OpId::rmsnorm_backward, kRms, "rmsnorm_backward_grid", 0);
}

TEST(VgpuFaultsDeathTest, MissingBarrierInAttentionIsARace) {
  EXPECT_DEATH(run_with_fault(OpId::attention_forward, kAttention, "attention_fwd_no_sync", 1),
               "(shared-memory race|read of shared memory never written).* kernel attention_fwd_kernel .*block \\(");
}

TEST(VgpuFaultsDeathTest, GridOneBlockShortGivesAWrongResult) {
  EXPECT_DEATH(run_with_fault(OpId::rmsnorm_backward, kRms, "rmsnorm_backward_grid", -1), "wrong result: .*dx");
}

TEST(VgpuFaultsDeathTest, GridOneBlockLongIsABoundsError) {
  EXPECT_DEATH(run_with_fault(OpId::rmsnorm_backward, kRms, "rmsnorm_backward_grid", 1),
               "global write .* outside every device allocation .*rmsnorm_backward_kernel.*block \\(3,0,0\\)");
}

}  // namespace
}  // namespace ft::test

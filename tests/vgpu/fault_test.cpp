// Proof that the virtual GPU's checks fire: the CUDA plugin on the virtual GPU built with kernels
// that carry planted faults (FT_VGPU_FAULTS, off unless a test sets them, vgpu/faults.h:
// ft_vgpu_fault_plugin), and each death test below runs an op through the plugin's OpTable, its
// buffers staged through pool memory, with one fault on and expects the process to die with the
// executor's report — a race naming the kernel, the block and both threads; a wrong result; a
// bounds error naming the kernel and the extra block; a misaligned vector access.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/runtime.h"
#include "ops/op_cases.h"
#include "ops/op_staging.h"
#include "tensor/device_runtime.h"
#include "vgpu/cuda_sim.h"

namespace ft::test {
namespace {

// The row on its shape through the plugin's table with `fault` set; dies printing the executor's
// error or the difference from the reference; returns when the op ran and matched.
void run_with_fault(OpId id, const Shape& s, const char* fault, int value) {
  static const ExecContext ctx = [] {
    cuda::register_cuda_backend();
    return make_exec_context(Device::kCUDA, 0);
  }();
  vgpu::set_fault(fault, value);
  const OpCase& row = op_case(id);
  const Case before = row.make(s, 1);
  Case want = before, got = before;
  row.run(ref::op_table(), cpu_context(), want);
  try {
    run_case(row, cuda::op_table(), ctx, got);
    synchronize(ctx);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vgpu error: %s\n%s\n", e.what(), vgpu::fault_report());
    std::abort();
  }
  const std::string diff = row.compare(before, got, want);
  if (!diff.empty()) {
    std::fprintf(stderr, "wrong result: %s\n", diff.c_str());
    std::abort();
  }
}

// The virtual runtime's streams are threads: a death test re-runs the binary rather than fork it.
const bool kThreadsafeDeathTests = [] {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  return true;
}();

const Shape kAttention{{"B", 1}, {"T", 40}, {"H", 2}, {"Hkv", 1}, {"D", 16}, {"amp", 1}};
const Shape kRms{{"N", 40}, {"C", 24}, {"res", 0}};  // 3 chunks of 16 rows
// The extra block of a grid one block long writes its chunk's dweight partial past the others, in
// the context's scratch — which the real context rounds up to whole MiB (context.cpp), so the
// write lands in the scratch's slack (unread: harmless, and unseen on a GPU too) unless the
// partials fill the scratch exactly: 32 chunks of 16 rows × 4096 columns × 8 bytes = 1 MiB.
const Shape kRmsScratchEdge{{"N", 512}, {"C", 4096}, {"res", 0}};
const Shape kWidenOffset{{"n", 1000}, {"off", 1}};  // x and y one element past a 16-byte boundary

TEST(VgpuFaults, CleanRunsPass) {
  run_with_fault(OpId::attention_forward, kAttention, "attention_fwd_no_sync", 0);
  run_with_fault(OpId::rmsnorm_backward, kRms, "rmsnorm_backward_grid", 0);
  run_with_fault(OpId::from_bf16, kWidenOffset, "widen_ignores_alignment", 0);
}

TEST(VgpuFaultsDeathTest, MissingBarrierInAttentionIsARace) {
  EXPECT_DEATH(run_with_fault(OpId::attention_forward, kAttention, "attention_fwd_no_sync", 1),
               "(shared-memory race|read of shared memory never written).* kernel attention_fwd_kernel .*block \\(");
}

TEST(VgpuFaultsDeathTest, GridOneBlockShortGivesAWrongResult) {
  EXPECT_DEATH(run_with_fault(OpId::rmsnorm_backward, kRms, "rmsnorm_backward_grid", -1), "wrong result: .*dx");
}

TEST(VgpuFaultsDeathTest, GridOneBlockLongIsABoundsError) {
  EXPECT_DEATH(run_with_fault(OpId::rmsnorm_backward, kRmsScratchEdge, "rmsnorm_backward_grid", 1),
               "global write .* outside every device allocation .*rmsnorm_backward_kernel.*block \\(32,0,0\\)");
}

TEST(VgpuFaultsDeathTest, VectorAccessOffA16ByteBoundaryIsMisaligned) {
  EXPECT_DEATH(run_with_fault(OpId::from_bf16, kWidenOffset, "widen_ignores_alignment", 1),
               "misaligned address: a 16-byte vector access .* kernel .*block \\(");
}

}  // namespace
}  // namespace ft::test

// The CUDA plugin on the virtual GPU (issue 29 point 5): every row of the op harness through the
// plugin's own OpTable (op_table.cpp → launchers → our kernels on the SIMT executor; gemm.cpp →
// the emulated cuBLASLt; bf16 attention → attention_sdpa.cpp, which finds no cuDNN and takes the
// fp32 fallback), on a context of the real context.cpp/runtime.cpp over the virtual runtime. The
// checks are stage 1's (kernels_cuda_test, scripts/gpu_check.sh): the harness's own
// check_against_reference (the row's tolerance against ft::ref), check_repeatable (a second run,
// the same bits) and check_gradients (backward rows against float64 finite differences), the
// case's buffers staged through pool memory of the virtual runtime (op_staging.h) — so a kernel
// touching a byte outside them, or memory another stream is still using, is an error.
// Shapes: the harness's up to kMaxCaseBytes of buffers (always the first), as vgpu_kernels_test.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cuda/context.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/runtime.h"
#include "ops/op_cases.h"
#include "ops/op_checks.h"
#include "tensor/device_runtime.h"
#include "vgpu/cuda_sim.h"

namespace ft::test {
namespace {

// The rank's compute context (the first of the device: its stream is the memory stream).
const ExecContext& device() {
  static const ExecContext ctx = [] {
    cuda::register_cuda_backend();
    return make_exec_context(Device::kCUDA, 0);
  }();
  return ctx;
}

constexpr size_t kMaxCaseBytes = 96 << 10;
bool all_shapes() {
  const char* v = std::getenv("FT_VGPU_ALL_SHAPES");
  return v != nullptr && std::string(v) == "1";
}

struct Param {
  OpId id;
  size_t shape;
  bool grad;  // a shape of grad_shapes(): check_gradients; else test_shapes(): reference and repeat
};
void PrintTo(const Param& p, std::ostream* os) {
  *os << op_name(p.id) << (p.grad ? " gradient shape " : " shape ") << p.shape;
}

size_t case_bytes(const OpCase& row, const Shape& s) {
  size_t bytes = 0;
  for (const Buffer& b : row.make(s, 1).buffers()) bytes += b.data.size();
  return bytes;
}

std::vector<Param> rows() {
  std::vector<Param> out;
  for (const OpRow& r : op_rows()) {
    for (bool grad : {false, true}) {
      const std::vector<Shape> shapes = grad ? r.row().grad_shapes() : r.row().test_shapes();
      for (size_t i = 0; i < shapes.size(); ++i)
        if (i == 0 || all_shapes() || case_bytes(r.row(), shapes[i]) <= kMaxCaseBytes) out.push_back({r.id, i, grad});
    }
  }
  return out;
}

class VgpuPlugin : public ::testing::TestWithParam<Param> {};

TEST_P(VgpuPlugin, StageOneChecks) {
  const Param& p = GetParam();
  const OpCase& row = op_case(p.id);
  const Shape s = (p.grad ? row.grad_shapes() : row.test_shapes())[p.shape];
  SCOPED_TRACE(std::string(op_name(p.id)) + ": " + s.str());
  if (p.grad) {
    EXPECT_EQ(check_gradients(row, s, cuda::op_table(), device()), "");
  } else {
    EXPECT_EQ(check_against_reference(row, s, cuda::op_table(), device()), "");
    EXPECT_EQ(check_repeatable(row, s, cuda::op_table(), device()), "");
  }
  synchronize(device());
  EXPECT_STREQ(vgpu::fault_report(), "");
}

INSTANTIATE_TEST_SUITE_P(Rows, VgpuPlugin, ::testing::ValuesIn(rows()), [](const ::testing::TestParamInfo<Param>& p) {
  return std::string(op_name(p.param.id)) + (p.param.grad ? "_grad_" : "_") + std::to_string(p.param.shape);
});

// cuDNN SDPA cannot be emulated: the plugin's loader finds none and bf16 attention runs on the
// fp32 kernels (the rows above then check that fallback against ft::ref).
TEST(VgpuPluginAttention, Bf16TakesTheFp32Fallback) {
  EXPECT_FALSE(cuda::have_cudnn_sdpa());
  EXPECT_NE(std::string(cuda::cudnn_sdpa_missing_reason()), "");
}

}  // namespace
}  // namespace ft::test

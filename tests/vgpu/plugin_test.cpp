// The CUDA plugin on the virtual GPU (issue 29 point 5): every row of the op harness through the
// plugin's own OpTable (op_table.cpp → launchers → our kernels on the SIMT executor; gemm.cpp →
// the emulated cuBLASLt; bf16 attention → attention_sdpa.cpp, which finds no cuDNN and takes the
// fp32 fallback), on a context of the real context.cpp/runtime.cpp over the virtual runtime. The
// checks are stage 1's (kernels_cuda_test, scripts/gpu_check.sh): the row's tolerance against
// ft::ref, a second run from the same inputs giving the same bits, and check_gradients (backward
// rows against float64 finite differences), the case's buffers staged through pool memory of the
// virtual runtime (op_staging.h) — so a kernel touching a byte outside them, or memory another
// stream is still using, is an error; shared memory is checked for races and unwritten reads,
// barriers for every thread arriving.
// Shapes: the harness's up to kMaxCaseBytes of buffers (always the first); FT_VGPU_ALL_SHAPES=1
// runs every shape (minutes: not in CI). At the end: per op, the shapes run and the largest
// difference from the reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "backends/cuda/context.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/runtime.h"
#include "ops/op_cases.h"
#include "ops/op_checks.h"
#include "ops/op_staging.h"
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

// The executor runs a fiber per CUDA thread: the largest attention shapes take half a minute each.
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

size_t case_bytes(const Case& c) {
  size_t bytes = 0;
  for (const Buffer& b : c.buffers()) bytes += b.data.size();
  return bytes;
}

std::vector<Param> rows() {
  std::vector<Param> out;
  for (const OpRow& r : op_rows()) {
    for (bool grad : {false, true}) {
      const std::vector<Shape> shapes = grad ? r.row().grad_shapes() : r.row().test_shapes();
      for (size_t i = 0; i < shapes.size(); ++i)
        if (i == 0 || all_shapes() || case_bytes(r.row().make(shapes[i], 1)) <= kMaxCaseBytes)
          out.push_back({r.id, i, grad});
    }
  }
  return out;
}

// Per op: the shapes run and the largest |got - ref| of an output (NaN where one is NaN alone).
struct Summary {
  int shapes = 0;
  double max_err = 0;
};
std::map<std::string, Summary>& summary() {
  static std::map<std::string, Summary> s;
  return s;
}
void add_to_summary(OpId id, const Case& got, const Case& want) {
  double e = 0;
  for (const Buffer& b : got.buffers()) {
    if (!b.is_output()) continue;
    const Buffer& w = want.buffer(b.name);
    for (size_t i = 0; i < b.count; ++i) {
      if (b.at(i) == w.at(i)) continue;  // infinities too
      const double d = std::fabs(b.at(i) - w.at(i));
      if (std::isnan(d) && !(std::isnan(b.at(i)) && std::isnan(w.at(i)))) e = NAN;
      if (!std::isnan(d) && !std::isnan(e)) e = std::max(e, d);
    }
  }
  Summary& s = summary()[op_name(id)];
  ++s.shapes;
  s.max_err = std::isnan(e) || std::isnan(s.max_err) ? NAN : std::max(s.max_err, e);
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
    // check_against_reference and check_repeatable with two device runs instead of three.
    const Case before = row.make(s, 1);
    Case want = before, got = before, again = before;
    row.run(ref::op_table(), cpu_context(), want);
    run_case(row, cuda::op_table(), device(), got);
    run_case(row, cuda::op_table(), device(), again);
    EXPECT_EQ(row.compare(before, got, want), "");
    for (const Buffer& b : got.buffers()) {
      if (!b.is_output()) continue;
      EXPECT_TRUE(b.data == again.buffer(b.name).data) << b.name << ": a second run differs";
    }
    add_to_summary(p.id, got, want);
  }
  synchronize(device());
  EXPECT_STREQ(vgpu::fault_report(), "");
}

INSTANTIATE_TEST_SUITE_P(Rows, VgpuPlugin, ::testing::ValuesIn(rows()), [](const ::testing::TestParamInfo<Param>& p) {
  return std::string(op_name(p.param.id)) + (p.param.grad ? "_grad_" : "_") + std::to_string(p.param.shape);
});

// The kernels on a 2-D grid of rows (launch.h row_vector_launch) stride over the rows past 65535 of
// them: with the grid capped at 3 rows (the executor's "grid_y_cap") every row loop runs several
// times — the position steps of rope and kv_cache_write included — and must give the same result.
TEST(VgpuPluginRowStride, RowsPastTheGridMatchTheReference) {
  for (const char* op :
       {"embedding_forward", "swiglu_forward", "swiglu_backward", "swiglu_forward_bf16", "swiglu_backward_bf16",
        "rope_forward", "rope_backward", "rope_forward_bf16", "rope_backward_bf16", "kv_cache_write"}) {
    const auto it = std::find_if(op_rows().begin(), op_rows().end(),
                                 [&](const OpRow& r) { return std::string(op_name(r.id)) == op; });
    ASSERT_NE(it, op_rows().end()) << op;
    for (const Shape& s : it->row().test_shapes()) {
      const Case before = it->row().make(s, 1);
      if (case_bytes(before) > kMaxCaseBytes) continue;
      SCOPED_TRACE(std::string(op) + ": " + s.str());
      Case want = before, got = before;
      it->row().run(ref::op_table(), cpu_context(), want);
      {
        struct Cap {
          Cap() { vgpu::set_fault("grid_y_cap", 3); }
          ~Cap() { vgpu::set_fault("grid_y_cap", 0); }
        } cap;
        run_case(it->row(), cuda::op_table(), device(), got);
      }
      EXPECT_EQ(it->row().compare(before, got, want), "");
    }
  }
  synchronize(device());
  EXPECT_STREQ(vgpu::fault_report(), "");
}

// cuDNN SDPA cannot be emulated: the plugin's loader finds none and bf16 attention runs on the
// fp32 kernels (the rows above then check that fallback against ft::ref).
TEST(VgpuPluginAttention, Bf16TakesTheFp32Fallback) {
  EXPECT_FALSE(cuda::have_cudnn_sdpa());
  EXPECT_NE(std::string(cuda::cudnn_sdpa_missing_reason()), "");
}

// The per-op report (printed once, after the rows this process ran).
class Report : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const auto& [op, s] : summary())
      std::printf("vgpu op %-26s shapes %d  max |got - ref| %.3g\n", op.c_str(), s.shapes, s.max_err);
  }
};
const auto* const kReport = ::testing::AddGlobalTestEnvironment(new Report);

}  // namespace
}  // namespace ft::test

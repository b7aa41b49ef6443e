// Every CUDA kernel of the op list on the virtual GPU (tests/vgpu: the SIMT executor running the
// real .cu files on the CPU): each row of the op harness (tests/ops: odd sizes, vector tails, GQA,
// vocab shards) through the CUDA backend's OpTable and launchers, against the reference (ft::ref)
// with the row's tolerance, twice from the same inputs for the same bits. The case's buffers are
// the device allocations (a kernel touching a byte outside them fails, naming kernel and block);
// shared memory is checked for races and unwritten reads, barriers for every thread arriving.
// Rows whose CUDA op is not a kernel of ours (cuBLASLt GEMMs, cuDNN attention) are skipped.
// At the end: per op, the shapes run and the largest difference from the reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include "backends/cuda/context.h"
#include "backends/cuda/cuda_ops.h"
#include "ops/op_cases.h"
#include "vgpu/cuda_sim.h"

namespace ft::test {
namespace {

bool not_a_kernel(OpId id) {
  static const std::set<std::string> kOther = {"matmul",
                                               "matmul_bf16",
                                               "matmul_bf16_add",
                                               "matmul_bf16_rounded",
                                               "attention_forward_bf16",
                                               "attention_backward_bf16"};
  return kOther.count(op_name(id)) > 0;
}

// Runs the row on c through the CUDA table, c's buffers registered as device memory meanwhile.
void run_on_vgpu(const OpCase& row, Case& c) {
  cuda::CudaContext cuda(0);
  ExecContext ctx;
  ctx.backend = &cuda;
  for (Buffer& b : c.buffers()) vgpu::register_memory(b.data.data(), b.data.size(), b.name.c_str());
  struct Unregister {
    Case& c;
    ~Unregister() {
      for (Buffer& b : c.buffers()) vgpu::unregister_memory(b.data.data());
    }
  } unregister{c};
  row.run(cuda::op_table(), ctx, c);
}

double max_error(const Case& got, const Case& want) {
  double e = 0;
  for (const Buffer& b : got.buffers()) {
    if (!b.is_output()) continue;
    const Buffer& w = want.buffer(b.name);
    for (size_t i = 0; i < b.count; ++i) {
      if (b.at(i) == w.at(i)) continue;  // infinities too
      const double d = std::fabs(b.at(i) - w.at(i));
      if (std::isnan(d) && !(std::isnan(b.at(i)) && std::isnan(w.at(i)))) return NAN;
      if (!std::isnan(d)) e = std::max(e, d);
    }
  }
  return e;
}

struct Summary {
  int shapes = 0;
  double max_err = 0;
};
std::map<std::string, Summary>& summary() {
  static std::map<std::string, Summary> s;
  return s;
}

struct Param {
  OpId id;
  size_t shape;
};
void PrintTo(const Param& p, std::ostream* os) {
  *os << op_name(p.id) << " shape " << p.shape;
}

// The harness's shapes up to kMaxCaseBytes of buffers (the executor runs a fiber per CUDA thread:
// the largest attention shapes take half a minute each here), always at least the first;
// FT_VGPU_ALL_SHAPES=1 runs every shape (minutes: not in CI).
constexpr size_t kMaxCaseBytes = 96 << 10;
bool all_shapes() {
  const char* v = std::getenv("FT_VGPU_ALL_SHAPES");
  return v != nullptr && std::string(v) == "1";
}

std::vector<Param> kernel_shapes() {
  std::vector<Param> out;
  for (const OpRow& r : op_rows()) {
    if (not_a_kernel(r.id)) continue;
    const std::vector<Shape> shapes = r.row().test_shapes();
    for (size_t i = 0; i < shapes.size(); ++i) {
      size_t bytes = 0;
      const Case c = r.row().make(shapes[i], 1);
      for (const Buffer& b : c.buffers()) bytes += b.data.size();
      if (i == 0 || bytes <= kMaxCaseBytes || all_shapes()) out.push_back({r.id, i});
    }
  }
  return out;
}

class VgpuKernels : public ::testing::TestWithParam<Param> {};

TEST_P(VgpuKernels, MatchReferenceTwiceBitwise) {
  const OpCase& row = op_case(GetParam().id);
  const Shape s = row.test_shapes()[GetParam().shape];
  SCOPED_TRACE(std::string(op_name(GetParam().id)) + ": " + s.str());
  const Case before = row.make(s, 1);
  Case want = before, got = before, again = before;
  row.run(ref::op_table(), cpu_context(), want);
  run_on_vgpu(row, got);
  run_on_vgpu(row, again);
  EXPECT_EQ(row.compare(before, got, want), "");
  for (const Buffer& b : got.buffers()) {
    if (!b.is_output()) continue;
    EXPECT_TRUE(b.data == again.buffer(b.name).data) << b.name << ": two runs differ";
  }
  Summary& sum = summary()[op_name(GetParam().id)];
  ++sum.shapes;
  const double e = max_error(got, want);
  sum.max_err = std::isnan(e) || std::isnan(sum.max_err) ? NAN : std::max(sum.max_err, e);
}

INSTANTIATE_TEST_SUITE_P(Rows, VgpuKernels, ::testing::ValuesIn(kernel_shapes()),
                         [](const ::testing::TestParamInfo<Param>& p) {
                           return std::string(op_name(p.param.id)) + "_" + std::to_string(p.param.shape);
                         });

// The per-op report (printed once, after the rows this process ran).
class Report : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const auto& [op, s] : summary())
      std::printf("vgpu kernel %-26s shapes %d  max |got - ref| %.3g\n", op.c_str(), s.shapes, s.max_err);
  }
};
const auto* const kReport = ::testing::AddGlobalTestEnvironment(new Report);

}  // namespace
}  // namespace ft::test

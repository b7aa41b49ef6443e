// The op harness (tests/ops): every row — one per op of kernels/op_decls.inc — on every shape of
// the row, through the CPU backend: against the reference, and twice from the same inputs for
// the same bits; every backward row's gradients against float64 finite differences. The op
// registry itself: one row per op, names, a backend table with every op, dispatch by device.
#include <gtest/gtest.h>

#include <ostream>
#include <set>
#include <string>

#include "ops/op_cases.h"
#include "ops/op_checks.h"
#include "ops/op_staging.h"
#include "tensor/backend.h"
#include "util/error.h"

namespace ft::test {
namespace {

struct Param {
  OpId id;
  size_t shape;  // index into the row's test_shapes() (or grad_shapes())
};

void PrintTo(const Param& p, std::ostream* os) {
  *os << op_name(p.id) << " shape " << p.shape;
}

std::vector<Param> every_shape(bool gradient_rows) {
  std::vector<Param> out;
  for (const OpRow& r : op_rows()) {
    const size_t n = gradient_rows ? r.row().grad_shapes().size() : r.row().test_shapes().size();
    for (size_t i = 0; i < n; ++i) out.push_back({r.id, i});
  }
  return out;
}

std::string param_name(const ::testing::TestParamInfo<Param>& p) {
  return std::string(op_name(p.param.id)) + "_" + std::to_string(p.param.shape);
}

class OpRows : public ::testing::TestWithParam<Param> {};

TEST_P(OpRows, MatchesReferenceAndRepeats) {
  const OpCase& row = op_case(GetParam().id);
  const Shape s = row.test_shapes()[GetParam().shape];
  SCOPED_TRACE(std::string(op_name(GetParam().id)) + ": " + s.str());
  EXPECT_EQ(check_against_reference(row, s, cpu::op_table(), cpu_context()), "");
  EXPECT_EQ(check_repeatable(row, s, cpu::op_table(), cpu_context()), "");
}

INSTANTIATE_TEST_SUITE_P(Cpu, OpRows, ::testing::ValuesIn(every_shape(false)), param_name);

class GradRows : public ::testing::TestWithParam<Param> {};

TEST_P(GradRows, MatchFiniteDifferences) {
  const OpCase& row = op_case(GetParam().id);
  const Shape s = row.grad_shapes()[GetParam().shape];
  SCOPED_TRACE(std::string(op_name(GetParam().id)) + ": " + s.str());
  EXPECT_EQ(check_gradients(row, s, cpu::op_table(), cpu_context()), "");
  EXPECT_EQ(check_gradients(row, s, ref::op_table(), cpu_context()), "");
}

INSTANTIATE_TEST_SUITE_P(Cpu, GradRows, ::testing::ValuesIn(every_shape(true)), param_name);

// The staging a device backend's rows run through (op_staging.h: the case copied into memory of
// the context's device, pointers mapped, outputs copied back), on the CPU's memory: every row gives
// the bits of the direct run, so a GPU's check compares the GPU's op, not the staging.
TEST(OpStaging, AStagedRunIsTheDirectRun) {
  for (const OpRow& r : op_rows()) {
    const OpCase& row = r.row();
    for (const Shape& s : row.test_shapes()) {
      SCOPED_TRACE(std::string(op_name(r.id)) + ": " + s.str());
      const Case before = row.make(s, 3);
      Case direct = before, staged = before;
      row.run(cpu::op_table(), cpu_context(), direct);
      run_case_staged(row, cpu::op_table(), cpu_context(), staged);
      for (Buffer& b : staged.buffers()) {
        b.tol = Tol::exact();
        EXPECT_EQ(compare_buffer(b, direct.buffer(b.name)), "") << b.name;
      }
    }
  }
}

TEST(OpRegistry, EveryOpHasARowWithShapesAndACost) {
  ASSERT_EQ(op_rows().size(), kOpCount);
  for (size_t i = 0; i < kOpCount; ++i) {
    const OpRow& r = op_rows()[i];
    EXPECT_EQ(static_cast<size_t>(r.id), i);
    EXPECT_FALSE(r.row().test_shapes().empty()) << op_name(r.id);
    const Cost c = r.row().cost(r.row().bench_shape());
    EXPECT_GT(c.bytes, 0) << op_name(r.id);
  }
}

// A backward op without a gradient check would only be compared with the reference, which could
// share its mistake.
TEST(OpRegistry, EveryBackwardOpHasAGradientCheck) {
  for (const OpRow& r : op_rows()) {
    const std::string name = op_name(r.id);
    if (name.find("_backward") == std::string::npos) continue;
    EXPECT_FALSE(r.row().grads().empty()) << name;
    EXPECT_FALSE(r.row().grad_shapes().empty()) << name;
  }
}

TEST(OpRegistry, NamesAreTheListsAndUnique) {
  EXPECT_STREQ(op_name(OpId::matmul), "matmul");
  EXPECT_STREQ(op_name(OpId::rmsnorm_forward_bf16), "rmsnorm_forward_bf16");
  EXPECT_STREQ(op_name(static_cast<OpId>(kOpCount - 1)), "adamw_step");
  std::set<std::string> names;
  for (size_t i = 0; i < kOpCount; ++i) names.insert(op_name(static_cast<OpId>(i)));
  EXPECT_EQ(names.size(), kOpCount);
}

TEST(OpRegistry, BackendTablesHoldEveryOp) {
  for (const OpTable* t : {&ref::op_table(), &cpu::op_table()}) {
#define FT_OP(name, params, args) EXPECT_NE(t->name, nullptr) << t->backend << " lacks " #name;
#include "kernels/op_decls.inc"
#undef FT_OP
  }
  EXPECT_STREQ(cpu::op_table().backend, "cpu");
  EXPECT_STREQ(ref::op_table().backend, "ref");
}

// ops:: runs the table registered for the context's device: here a stand-in "cuda" backend, the CPU
// ops with one op replaced by a counter.
int g_add_calls = 0;
void counting_add(const ExecContext& ctx, float* y, const float* x, int64_t n) {
  EXPECT_EQ(ctx.device, Device::kCUDA);
  ++g_add_calls;
  cpu::add_inplace(cpu_context(), y, x, n);
}

TEST(OpDispatch, RunsTheTableOfTheContextsDevice) {
  OpTable stand_in = cpu::op_table();
  stand_in.backend = "stand-in";
  stand_in.add_inplace = &counting_add;
  ASSERT_EQ(find_backend(Device::kCUDA), nullptr);
  register_backend(Backend{.device = Device::kCUDA, .ops = &stand_in});
  ExecContext gpu;
  gpu.device = Device::kCUDA;
  std::vector<float> y = {1.0f, 2.0f, 3.0f};
  const std::vector<float> x = {0.5f, 0.25f, 0.125f};
  ops::add_inplace(gpu, y.data(), x.data(), 3);
  ops::add_inplace(cpu_context(), y.data(), x.data(), 3);  // the CPU's own table: not counted
  unregister_backend(Device::kCUDA);
  EXPECT_EQ(g_add_calls, 1);
  EXPECT_EQ(y, (std::vector<float>{2.0f, 2.5f, 3.25f}));
  EXPECT_EQ(find_backend(Device::kCUDA), nullptr);
  EXPECT_EQ(backend_of(cpu_context()).ops, &cpu::op_table());
}

TEST(OpDispatch, ADeviceWithoutABackendIsAnErrorNamingDeviceAndOp) {
  ExecContext gpu;
  gpu.device = Device::kCUDA;
  std::vector<float> y(3, 1.0f);
  try {
    ops::add_inplace(gpu, y.data(), y.data(), 3);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "op add_inplace on device cuda: no backend runs ops there (this process has: cpu)");
  }
  EXPECT_THROW(make_exec_context(Device::kCUDA), Error);
  EXPECT_EQ(make_exec_context(Device::kCPU).device, Device::kCPU);
}

}  // namespace
}  // namespace ft::test

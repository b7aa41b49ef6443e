// Row: adamw_step. One update at step 1 and at step 3 (the bias corrections differ), with and
// without the bf16 copy; several steps in a row are tests/unit/kernels_test.cpp. The step's values
// are an input buffer like the others (device memory on a GPU), as the trainer hands them over.
#include "ops/op_cases.h"
#include "ops/rows_util.h"

namespace ft::test::rows {
namespace {

class AdamWStep final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override {
    std::vector<Shape> out;
    for (int64_t n : {1, 17, 100003})
      for (int64_t step : {1, 3})
        for (int64_t bf16 : {0, 1}) out.push_back({{"n", n}, {"step", step}, {"bf16", bf16}});
    return out;
  }
  Shape bench_shape() const override { return {{"n", 16 << 20}, {"step", 1}, {"bf16", 1}}; }
  Case make(const Shape& s, uint64_t seed) const override {
    const int64_t n = s["n"];
    Case c(s);
    c.in_f32("grad", n, seed + 70 + s["step"]);
    const AdamwStepScalars st = adamw_step_scalars(3e-3f, 0.9f, 0.95f, s["step"], 0.5f);
    c.in_f32("step_scalars", {st.lr, st.step_size, st.bc2_sqrt, st.grad_scale});
    // m = b1 m + (1 − b1) g can cancel: absolute tolerances scale with the largest element.
    c.inout_f32("param", n, seed + 71, Tol::close(1e-6, 0, 1e-6));
    c.inout_f32("m", n, seed + 72, Tol::close(1e-6, 0, 1e-6), -0.01f, 0.01f);
    c.inout_f32("v", n, seed + 73, Tol::close(1e-6, 0, 1e-6), 1e-6f, 1e-4f);
    if (s["bf16"]) c.out_bf16("param_bf16", n, Tol::bf16());
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    static_assert(sizeof(AdamwStepScalars) == 4 * sizeof(float));
    const auto* step = reinterpret_cast<const AdamwStepScalars*>(c.f32("step_scalars"));
    ops.adamw_step(ctx, c.f32("param"), c.f32("m"), c.f32("v"), c["bf16"] ? c.bf16("param_bf16") : nullptr,
                   c.f32("grad"), c["n"], step, 0.9f, 0.95f, 1e-8f, 0.1f);
  }
  Cost cost(const Shape& s) const override {
    return {(7 * kF32Bytes + (s["bf16"] ? kBf16Bytes : 0)) * s["n"], 16.0 * s["n"]};
  }
};

}  // namespace

const OpCase& adamw_step() {
  static const AdamWStep row;
  return row;
}

}  // namespace ft::test::rows

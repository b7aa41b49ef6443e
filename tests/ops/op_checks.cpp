#include "ops/op_checks.h"

#include <algorithm>
#include <cmath>

#include "ops/op_staging.h"

namespace ft::test {
namespace {

std::string join(std::string a, const std::string& b) {
  if (b.empty()) return a;
  return a.empty() ? b : a + "\n" + b;
}

// d loss / d x_i by central differences, x_i ± h_i with h_i = 1e-5 · max(1, |x_i|).
std::vector<double> fd_gradient(const OpCase& row, const Case& c, Inputs64 in, const std::string& input) {
  std::vector<double>& x = in.find(input)->second;
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double xi = x[i], h = 1e-5 * std::max(1.0, std::fabs(xi));
    x[i] = xi + h;
    const double fp = row.loss64(c, in);
    x[i] = xi - h;
    const double fm = row.loss64(c, in);
    x[i] = xi;
    g[i] = (fp - fm) / (2 * h);
  }
  return g;
}

Buffer f64_buffer(const std::string& name, const std::vector<double>& v, Tol tol) {
  Buffer b;
  b.name = name;
  b.elem = Elem::kF64;
  b.role = Role::kOut;
  b.tol = tol;
  b.count = v.size();
  b.data.resize(std::max<size_t>(v.size(), 1) * sizeof(double));
  std::copy(v.begin(), v.end(), b.as<double>());
  return b;
}

}  // namespace

std::string check_against_reference(const OpCase& row, const Shape& s, const OpTable& ops, const ExecContext& ctx,
                                    uint64_t seed) {
  const Case before = row.make(s, seed);
  Case got = before, want = before;
  run_case(row, ops, ctx, got);
  row.run(ref::op_table(), cpu_context(), want);
  return row.compare(before, got, want);
}

std::string check_repeatable(const OpCase& row, const Shape& s, const OpTable& ops, const ExecContext& ctx,
                             uint64_t seed) {
  const Case before = row.make(s, seed);
  Case first = before, second = before;
  run_case(row, ops, ctx, first);
  run_case(row, ops, ctx, second);
  std::string errors;
  for (Buffer& b : second.buffers()) {
    if (!b.is_output()) continue;
    b.tol = Tol::exact();
    errors = join(errors, compare_buffer(b, first.buffer(b.name)));
  }
  return errors.empty() ? "" : "a second run differs:\n" + errors;
}

std::string check_gradients(const OpCase& row, const Shape& s, const OpTable& ops, const ExecContext& ctx,
                            uint64_t seed) {
  const Case before = row.make(s, seed);
  Inputs64 in;
  for (const Buffer& b : before.buffers()) {
    // fp32 and bf16 inputs (widened): what the loss is a function of.
    if ((b.elem != Elem::kF32 && b.elem != Elem::kBF16) || b.role == Role::kOut) continue;
    std::vector<double>& v = in[b.name];
    for (size_t i = 0; i < b.count; ++i) v.push_back(b.at(i));
  }
  Case got = before;
  run_case(row, ops, ctx, got);
  const auto grads64 = row.backward64(before, in);
  std::string errors;
  for (const GradOf& g : row.grads()) {
    const std::vector<double> fd = fd_gradient(row, before, in, g.input);
    // What the backend computed: the buffer, less what it held before when the op accumulates.
    const Buffer& out = got.buffer(g.grad);
    std::vector<double> analytic(out.count);
    for (size_t i = 0; i < out.count; ++i)
      analytic[i] = out.at(i) - (g.accumulates ? before.buffer(g.grad).at(i) : 0.0);
    const std::string what = std::string("d loss / d ") + g.input + " (" + g.grad + ")";
    errors = join(errors, compare_buffer(f64_buffer(what + " from " + ops.backend, analytic, row.grad_tol()),
                                         f64_buffer(what, fd, {})));
    const auto it = grads64.find(g.grad);
    if (it == grads64.end()) {
      errors = join(errors, std::string("the row's backward64 computes no ") + g.grad);
      continue;
    }
    errors = join(
        errors, compare_buffer(f64_buffer(what + " from the float64 reference", it->second, Tol::close(1e-6, 0, 1e-9)),
                               f64_buffer(what, fd, {})));
  }
  return errors;
}

}  // namespace ft::test

// Test helpers for kernels: random inputs, element-wise comparison, and float64 central finite
// differences for gradient checks. Generic: a loss is any callable double(const double* in).
//
//   std::vector<double> x = ft::test::random_doubles(n, /*seed=*/1);
//   std::vector<double> w = ft::test::random_doubles(n_out, 2);      // loss = Σ w ∘ out
//   auto loss = [&](const double* in) {
//     std::vector<double> out(n_out);
//     ft::ref_impl::swiglu_forward(out.data(), in, N, F);             // forward in float64
//     return ft::test::dot(w, out);
//   };
//   std::vector<double> fd = ft::test::fd_gradient(loss, x);         // d loss / d x, element-wise
//   EXPECT_TRUE(ft::test::all_close(analytic.data(), fd.data(), n, /*rtol=*/1e-4, /*atol=*/1e-6));
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <sstream>
#include <vector>

namespace ft::test {

// Uniform in [lo, hi): never exactly zero for the ranges used in practice.
inline std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

inline std::vector<double> random_doubles(size_t n, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = d(rng);
  return v;
}

template <typename A, typename B>
std::vector<A> cast_vec(const std::vector<B>& v) {
  return std::vector<A>(v.begin(), v.end());
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) s += a[i] * b[i];
  return s;
}

// d f / d x_i by central differences, x_i ± h_i with h_i = rel_step · max(1, |x_i|).
// f is called 2 n times with a perturbed copy of x.
inline std::vector<double> fd_gradient(const std::function<double(const double*)>& f, const std::vector<double>& x,
                                       double rel_step = 1e-5) {
  std::vector<double> xp = x, g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double h = rel_step * std::max(1.0, std::fabs(x[i]));
    xp[i] = x[i] + h;
    double fp = f(xp.data());
    xp[i] = x[i] - h;
    double fm = f(xp.data());
    xp[i] = x[i];
    g[i] = (fp - fm) / (2 * h);
  }
  return g;
}

// |got_i − want_i| <= atol + rtol |want_i| for every i; on failure names the worst element.
template <typename G, typename W>
::testing::AssertionResult all_close(const G* got, const W* want, size_t n, double rtol, double atol) {
  double worst = -1;  // largest err / allowed; +inf for NaN
  size_t worst_i = 0, bad = 0;
  for (size_t i = 0; i < n; ++i) {
    double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    double err = std::fabs(g - w), allowed = atol + rtol * std::fabs(w);
    bool ok = err <= allowed;  // false for NaN
    double excess = ok ? err / (allowed > 0 ? allowed : 1.0) : (std::isnan(err) ? INFINITY : err / allowed);
    if (!ok) ++bad;
    if (excess > worst) {
      worst = excess;
      worst_i = i;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  std::ostringstream os;
  os.precision(9);
  os << bad << " of " << n << " elements differ; worst at [" << worst_i << "]: got "
     << static_cast<double>(got[worst_i]) << ", want " << static_cast<double>(want[worst_i]) << " (rtol " << rtol
     << ", atol " << atol << ")";
  return ::testing::AssertionFailure() << os.str();
}

template <typename G, typename W>
::testing::AssertionResult all_close(const std::vector<G>& got, const std::vector<W>& want, double rtol, double atol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "sizes differ: " << got.size() << " vs " << want.size();
  return all_close(got.data(), want.data(), got.size(), rtol, atol);
}

// Largest |v_i|: scales absolute tolerances to the data.
template <typename T>
double max_abs(const std::vector<T>& v) {
  double m = 0;
  for (const T& x : v) m = std::max(m, std::fabs(static_cast<double>(x)));
  return m;
}

}  // namespace ft::test

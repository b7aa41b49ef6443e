#include "plan/research/fit.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>

#include "plan/research/record.h"
#include "util/error.h"

namespace ft::plan {

namespace {

constexpr double kFitCoverage = 0.90;  // fraction of records the fit's loss covers

struct Prepared {
  nlohmann::json rec;
  RecordJob rj;
  PublishedFigure figure;
};

std::vector<Prepared> prepare(const nlohmann::json& records, Validation& v) {
  if (!records.is_array()) throw Error("expected a JSON array of published-run records");
  std::vector<Prepared> out;
  for (const auto& rec : records) {
    const std::string id = rec.value("id", std::string("?"));
    const std::string category =
        rec.contains("category") && rec["category"].is_string() ? rec["category"].get<std::string>() : "";
    if (category == "formula" || category == "hardware") {
      v.skipped.emplace_back(id, "not a training run (" + category + ")");
      continue;
    }
    auto fig = published_figure(rec);
    if (!fig) {
      v.skipped.emplace_back(id, "no published throughput");
      continue;
    }
    try {
      out.push_back({rec, job_from_record(rec), *fig});
    } catch (const Error& e) {
      v.skipped.emplace_back(id, e.what());
    }
  }
  return out;
}

void apply(RecordJob& rj, const FamilyEfficiency* eff) {
  if (!eff) return;
  auto it = eff->find(rj.job.gpu.family);
  if (it != eff->end()) rj.job.gpu.eff = it->second;
}

Validation run(std::vector<Prepared>& prepared, const FamilyEfficiency* eff, Validation v) {
  std::vector<double> abs_err, log_err;
  for (auto& p : prepared) {
    RecordJob rj = p.rj;
    apply(rj, eff);
    RecordRow row;
    row.id = rj.id;
    row.gpu = rj.job.gpu.name;
    row.metric = p.figure.metric;
    row.published = p.figure.value;
    try {
      RecordPrediction pred = predict(rj);
      row.predicted = predicted_figure(p.rec, rj, pred, p.figure.metric);
      row.fits = pred.fits;
      row.layout = pred.plan.layout.describe();
    } catch (const Error& e) {
      v.skipped.emplace_back(rj.id, e.what());
      continue;
    }
    row.error = (row.predicted - row.published) / row.published;
    abs_err.push_back(std::abs(row.error));
    log_err.push_back(std::abs(std::log(row.predicted / row.published)));
    v.rows.push_back(row);
  }
  if (!log_err.empty()) {
    // Least trimmed squares (Rousseeuw): the mean squared log error of the best 90% of records,
    // so that the few runs the model cannot describe do not bend the fit for all others.
    std::vector<double> sorted = log_err;
    std::sort(sorted.begin(), sorted.end());
    const size_t keep =
        std::max<size_t>(1, static_cast<size_t>(std::ceil(kFitCoverage * static_cast<double>(sorted.size()))));
    double sum = 0;
    for (size_t i = 0; i < keep; ++i) sum += sorted[i] * sorted[i];
    v.fit_loss = sum / static_cast<double>(keep);
  }
  if (!abs_err.empty()) {
    v.median_abs_error = percentile(abs_err, 0.5);
    v.p90_abs_error = percentile(abs_err, 0.9);
    v.mean_abs_log_error = std::accumulate(log_err.begin(), log_err.end(), 0.0) / static_cast<double>(log_err.size());
  }
  return v;
}

}  // namespace

double percentile(std::vector<double> values, double q) {
  FT_CHECK(!values.empty(), "percentile of nothing");
  std::sort(values.begin(), values.end());
  const double pos = q * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (pos - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

Validation validate_records(const nlohmann::json& records, const FamilyEfficiency* eff) {
  Validation v;
  std::vector<Prepared> prepared = prepare(records, v);
  return run(prepared, eff, v);
}

std::string format_validation(const Validation& v) {
  std::string out = fmt::format("{:<58} {:<10} {:<22} {:>12} {:>12} {:>8}\n", "record", "gpu", "metric", "predicted",
                                "published", "error");
  for (const auto& r : v.rows)
    out += fmt::format("{:<58} {:<10} {:<22} {:>12.4g} {:>12.4g} {:>+7.1f}%{}\n", r.id.substr(0, 58), r.gpu, r.metric,
                       r.predicted, r.published, 100 * r.error, r.fits ? "" : "  (does not fit)");
  out += fmt::format("{} records compared, {} skipped; |error| median {:.1f}%, 90th percentile {:.1f}%\n",
                     v.rows.size(), v.skipped.size(), 100 * v.median_abs_error, 100 * v.p90_abs_error);
  return out;
}

std::vector<double> nelder_mead(const std::function<double(const std::vector<double>&)>& f, std::vector<double> x0,
                                int iterations, double step) {
  const size_t n = x0.size();
  std::vector<std::vector<double>> pts = {x0};
  for (size_t i = 0; i < n; ++i) {
    auto y = x0;
    y[i] = y[i] != 0 ? y[i] * (1 + step) : step;
    pts.push_back(y);
  }
  std::vector<double> vals;
  for (auto& p : pts) vals.push_back(f(p));
  auto combine = [&](const std::vector<double>& a, const std::vector<double>& b, double t) {
    std::vector<double> r(n);
    for (size_t i = 0; i < n; ++i) r[i] = a[i] + t * (b[i] - a[i]);
    return r;
  };
  for (int it = 0; it < iterations; ++it) {
    std::vector<size_t> order(pts.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return vals[a] < vals[b]; });
    std::vector<std::vector<double>> p2;
    std::vector<double> v2;
    for (size_t i : order) {
      p2.push_back(pts[i]);
      v2.push_back(vals[i]);
    }
    pts.swap(p2);
    vals.swap(v2);
    std::vector<double> c(n, 0.0);
    for (size_t i = 0; i < n; ++i)
      for (size_t k = 0; k < n; ++k) c[k] += pts[i][k] / static_cast<double>(n);
    auto xr = combine(c, pts[n], -1.0);
    double fr = f(xr);
    if (fr < vals[0]) {
      auto xe = combine(c, pts[n], -2.0);
      double fe = f(xe);
      if (fe < fr)
        pts[n] = xe, vals[n] = fe;
      else
        pts[n] = xr, vals[n] = fr;
    } else if (fr < vals[n - 1]) {
      pts[n] = xr, vals[n] = fr;
    } else {
      auto xc = combine(c, pts[n], 0.5);
      double fc = f(xc);
      if (fc < vals[n]) {
        pts[n] = xc, vals[n] = fc;
      } else {
        for (size_t i = 1; i <= n; ++i) {
          pts[i] = combine(pts[0], pts[i], 0.5);
          vals[i] = f(pts[i]);
        }
      }
    }
  }
  size_t best = static_cast<size_t>(std::min_element(vals.begin(), vals.end()) - vals.begin());
  return pts[best];
}

FitResult fit_records(const nlohmann::json& records, int iterations) {
  Validation skipped;
  std::vector<Prepared> prepared = prepare(records, skipped);
  const Efficiency a100 = find_gpu("a100-80gb").eff, h100 = find_gpu("h100-sxm").eff;
  auto to_eff = [&](const std::vector<double>& x) {
    Efficiency a = a100, h = h100;
    a.gemm = x[0];
    a.attention = a.attention_hopper = x[1];  // no warpgroup MMA: Hopper kernels run as FA2 does
    h.gemm = x[2];
    h.attention = x[3];
    h.gemm_fp8 = x[4];
    a.memory_traffic = h.memory_traffic = x[5];
    a.overlap = h.overlap = x[6];
    h.attention_hopper = x[7];
    return FamilyEfficiency{{"a100", a}, {"v100", a}, {"h100", h}, {"b200", h}};
  };
  std::vector<double> x0 = {a100.gemm,     a100.attention,      h100.gemm,    h100.attention,
                            h100.gemm_fp8, a100.memory_traffic, a100.overlap, h100.attention_hopper};
  auto loss = [&](const std::vector<double>& x) {
    for (size_t i = 0; i < 5; ++i)
      if (!(x[i] > 0.02 && x[i] <= 1)) return 1e9;
    if (!(x[5] > 0.1 && x[6] >= 0 && x[6] <= 1 && x[7] > 0.02 && x[7] <= 1)) return 1e9;
    if (x[4] > x[2]) return 1e9;  // fp8 GEMMs reach no larger fraction of their peak than bf16 ones
    FamilyEfficiency e = to_eff(x);
    return run(prepared, &e, Validation{}).fit_loss;
  };
  FitResult out;
  out.before = run(prepared, nullptr, skipped);
  std::vector<double> x = nelder_mead(loss, x0, iterations);
  out.eff = to_eff(x);
  out.after = run(prepared, &out.eff, skipped);
  return out;
}

}  // namespace ft::plan

// The planner against published runs: the validation table (predicted vs published per record)
// and the one-off fit of the per-family efficiencies that produced the catalog's values.
//
//   nlohmann::json runs = nlohmann::json::parse(read_file("configs/planner/published-runs-dev.json"));
//   Validation v = validate_records(runs);            // v.rows, v.median_abs_error,
//   v.p90_abs_error std::fputs(format_validation(v).c_str(), stdout); FitResult f =
//   fit_records(runs, 200);             // what `fluxtrain plan --fit-records` runs
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

#include "plan/catalog.h"

namespace ft::plan {

// Efficiency per GPU family ("a100", "h100", ...); families not listed keep the catalog's.
using FamilyEfficiency = std::map<std::string, Efficiency>;

struct RecordRow {
  std::string id, gpu, metric, layout;
  double predicted = 0, published = 0, error = 0;  // error = (predicted - published) / published
  bool fits = true;
};

struct Validation {
  std::vector<RecordRow> rows;
  std::vector<std::pair<std::string, std::string>> skipped;  // id, why
  double median_abs_error = 0, p90_abs_error = 0, mean_abs_log_error = 0;
  double fit_loss = 0;  // least trimmed squares of log(predicted / published), best 90% of records
};

// Runs the prediction of every record that is a training run with enough information.
Validation validate_records(const nlohmann::json& records, const FamilyEfficiency* eff = nullptr);
std::string format_validation(const Validation& v);

// Percentile with linear interpolation between order statistics (numpy's default).
double percentile(std::vector<double> values, double q);

struct FitResult {
  FamilyEfficiency eff;
  Validation before, after;
};
// Fits gemm and attention for the a100 and h100 families, gemm_fp8 and attention_hopper for
// h100 (gemm_fp8 at most its gemm) and the shared memory_traffic and overlap, minimising Validation::fit_loss (least
// trimmed squares of the log ratio over the best 90% of records). Families without runs (v100, b200) take the values of
// the nearest generation.
FitResult fit_records(const nlohmann::json& records, int iterations);

// Nelder–Mead minimisation of f from x0 (initial simplex: x0 with each coordinate scaled by
// 1 + step). Returns the best point found.
std::vector<double> nelder_mead(const std::function<double(const std::vector<double>&)>& f, std::vector<double> x0,
                                int iterations, double step = 0.15);

}  // namespace ft::plan

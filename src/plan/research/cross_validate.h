// The planner's error on published runs broken down by class of run, in-sample (the catalog's
// efficiencies, fitted on every record) and cross-validated (k folds by a hash of the record id:
// fit on k-1 folds, predict the held-out one; every record is predicted once while held out).
//
//   nlohmann::json runs = nlohmann::json::parse(read_file("configs/planner/published-runs-dev.json"));
//   CrossValidation cv = cross_validate(runs, 5, 150);   // what `fluxtrain plan --cross-validate` runs
//   std::fputs(format_cross_validation(cv).c_str(), stdout);
//   cv.held_out_classes[0].median  // "all": median |error| of the held-out predictions
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "plan/research/fit.h"

namespace ft::plan {

// The classes a record belongs to, besides "all": "dense 16-bit" (neither FP8 nor MoE), "FP8",
// "MoE" (num_experts > 1, or active_params_b below params_b), "> 4k GPUs", "< 1B params".
std::vector<std::string> record_classes(const nlohmann::json& rec);
// Every class name in table order ("all" first).
const std::vector<std::string>& class_names();

struct ClassError {
  std::string name;
  size_t n = 0;
  double median = 0, p90 = 0;  // of |error|; 0 when n == 0
};

struct CrossValidation {
  int folds = 0;
  Validation in_sample;             // the catalog's efficiencies
  std::vector<RecordRow> held_out;  // one row per record, predicted by the fit without its fold
  std::vector<int> fold_of;         // fold of each held_out row
  std::vector<ClassError> in_sample_classes, held_out_classes;  // class_names() order
};

// folds >= 2; iterations: Nelder-Mead iterations of each fold's fit (fit_records).
CrossValidation cross_validate(const nlohmann::json& records, int folds, int iterations);

// Errors of rows by class; each row's classes are those of the record with its id.
std::vector<ClassError> errors_by_class(const std::vector<RecordRow>& rows, const nlohmann::json& records);

// The by-class table: class, n, in-sample median/p90, cross-validated median/p90.
std::string format_cross_validation(const CrossValidation& cv);

}  // namespace ft::plan

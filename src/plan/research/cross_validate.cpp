#include "plan/research/cross_validate.h"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/hash.h"

namespace ft::plan {

namespace {

double number_or(const nlohmann::json& r, const char* key, double fallback) {
  auto it = r.find(key);
  return it != r.end() && it->is_number() ? it->get<double>() : fallback;
}

}  // namespace

const std::vector<std::string>& class_names() {
  static const std::vector<std::string> names = {"all", "dense 16-bit", "FP8", "MoE", "> 4k GPUs", "< 1B params"};
  return names;
}

std::vector<std::string> record_classes(const nlohmann::json& rec) {
  std::vector<std::string> out;
  const std::string prec = to_lower(
      rec.value("precision", nlohmann::json()).is_string() ? rec["precision"].get<std::string>() : std::string());
  const bool fp8 = prec.find("fp8") != std::string::npos || prec.find("float8") != std::string::npos ||
                   prec.find("mxfp8") != std::string::npos || prec.find("nvfp4") != std::string::npos;
  const double params = number_or(rec, "params_b", 0), active = number_or(rec, "active_params_b", params);
  const bool moe = number_or(rec, "num_experts", 1) > 1 || (params > 0 && active < 0.99 * params);
  if (!fp8 && !moe) out.push_back("dense 16-bit");
  if (fp8) out.push_back("FP8");
  if (moe) out.push_back("MoE");
  if (number_or(rec, "num_gpus", 0) > 4096) out.push_back("> 4k GPUs");
  if (params > 0 && params < 1) out.push_back("< 1B params");
  return out;
}

std::vector<ClassError> errors_by_class(const std::vector<RecordRow>& rows, const nlohmann::json& records) {
  std::map<std::string, std::vector<std::string>> classes_of;
  for (const auto& r : records)
    if (r.is_object() && r.contains("id") && r["id"].is_string())
      classes_of[r["id"].get<std::string>()] = record_classes(r);
  std::map<std::string, std::vector<double>> errs;
  for (const auto& row : rows) {
    errs["all"].push_back(std::abs(row.error));
    for (const auto& c : classes_of[row.id]) errs[c].push_back(std::abs(row.error));
  }
  std::vector<ClassError> out;
  for (const auto& name : class_names()) {
    ClassError c;
    c.name = name;
    const auto& e = errs[name];
    c.n = e.size();
    if (!e.empty()) {
      c.median = percentile(e, 0.5);
      c.p90 = percentile(e, 0.9);
    }
    out.push_back(c);
  }
  return out;
}

CrossValidation cross_validate(const nlohmann::json& records, int folds, int iterations) {
  if (!records.is_array()) throw Error("expected a JSON array of published-run records");
  if (folds < 2)
    throw Error(fmt::format("--folds {}: cross-validation needs at least 2 folds", folds),
                "use --folds 5 (the default) or --folds 2 for halves");
  CrossValidation cv;
  cv.folds = folds;
  cv.in_sample = validate_records(records);
  std::vector<nlohmann::json> parts(static_cast<size_t>(folds), nlohmann::json::array());
  auto fold_of = [&](const nlohmann::json& r) {
    const std::string id = r.is_object() && r.contains("id") && r["id"].is_string() ? r["id"].get<std::string>() : "";
    return static_cast<size_t>(hash_string(id) % static_cast<uint64_t>(folds));
  };
  for (const auto& r : records) parts[fold_of(r)].push_back(r);
  for (size_t k = 0; k < parts.size(); ++k) {
    nlohmann::json train = nlohmann::json::array();
    for (size_t j = 0; j < parts.size(); ++j)
      if (j != k)
        for (const auto& r : parts[j]) train.push_back(r);
    const FitResult f = fit_records(train, iterations);
    const Validation v = validate_records(parts[k], &f.eff);
    for (const auto& row : v.rows) {
      cv.held_out.push_back(row);
      cv.fold_of.push_back(static_cast<int>(k));
    }
  }
  cv.in_sample_classes = errors_by_class(cv.in_sample.rows, records);
  cv.held_out_classes = errors_by_class(cv.held_out, records);
  return cv;
}

std::string format_cross_validation(const CrossValidation& cv) {
  std::string out = fmt::format("{:<14} {:>5}   {:>10} {:>8}   {:>10} {:>8}\n", "class", "n", "in-sample", "",
                                fmt::format("{}-fold", cv.folds), "");
  out += fmt::format("{:<14} {:>5}   {:>10} {:>8}   {:>10} {:>8}\n", "", "", "median", "p90", "median", "p90");
  for (size_t i = 0; i < cv.in_sample_classes.size(); ++i) {
    const ClassError& a = cv.in_sample_classes[i];
    const ClassError& b = cv.held_out_classes[i];
    if (a.n == 0 && b.n == 0) {
      out += fmt::format("{:<14} {:>5}   {:>10} {:>8}   {:>10} {:>8}\n", a.name, 0, "-", "-", "-", "-");
      continue;
    }
    out += fmt::format("{:<14} {:>5}   {:>9.1f}% {:>7.1f}%   {:>9.1f}% {:>7.1f}%\n", a.name, b.n, 100 * a.median,
                       100 * a.p90, 100 * b.median, 100 * b.p90);
  }
  return out;
}

}  // namespace ft::plan

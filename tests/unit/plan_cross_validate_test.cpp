// The planner's error by class of run, in-sample and cross-validated (plan/research/
// cross_validate.h, `fluxtrain plan --cross-validate`): records fall into the classes their
// fields say, every record is predicted exactly once while its fold is held out, and the
// held-out prediction does not see the record's own published figure.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "plan/research/cross_validate.h"
#include "util/error.h"
#include "util/fs.h"

namespace ft::plan {
namespace {

const std::string kRuns = std::string(FT_SOURCE_DIR) + "/configs/planner/published-runs-dev.json";

std::string run_cli(const std::string& args, int* status) {
  const std::string cmd = std::string(FT_FLUXTRAIN_BIN) + " " + args + " 2>&1";
  std::string out;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(cmd.c_str(), "r"), ::pclose);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe.get())) > 0) out.append(buf, n);
  *status = ::pclose(pipe.release());
  return out;
}

TEST(PlanCrossValidate, ClassesFollowTheRecordsFields) {
  using J = nlohmann::json;
  EXPECT_EQ(record_classes(J{{"precision", "bf16"}, {"params_b", 7}, {"num_gpus", 64}}),
            std::vector<std::string>{"dense 16-bit"});
  EXPECT_EQ(record_classes(J{{"precision", "bf16 + Float8 linears"}, {"params_b", 8}}),
            std::vector<std::string>{"FP8"});
  EXPECT_EQ(record_classes(J{{"precision", "FP8-CS (FP8 current scaling)"}}), std::vector<std::string>{"FP8"});
  EXPECT_EQ(record_classes(J{{"precision", "MXFP8"}}), std::vector<std::string>{"FP8"});
  EXPECT_EQ(record_classes(J{{"params_b", 46.7}, {"active_params_b", 12.9}}), std::vector<std::string>{"MoE"});
  EXPECT_EQ(record_classes(J{{"num_experts", 8}, {"precision", "fp8"}}), (std::vector<std::string>{"FP8", "MoE"}));
  EXPECT_EQ(record_classes(J{{"num_gpus", 16384}, {"params_b", 405}}),
            (std::vector<std::string>{"dense 16-bit", "> 4k GPUs"}));
  EXPECT_EQ(record_classes(J{{"num_gpus", 4096}, {"params_b", 0.124}}),
            (std::vector<std::string>{"dense 16-bit", "< 1B params"}));
}

// Percentiles by hand: |errors| 0.1, 0.2, 0.3, 0.4 (numpy's linear interpolation: median 0.25,
// p90 = 0.3 + 0.7 * 0.1 = 0.37); the FP8 record alone: 0.4.
TEST(PlanCrossValidate, ErrorsByClassByHand) {
  nlohmann::json recs = nlohmann::json::array();
  std::vector<RecordRow> rows;
  const double errs[] = {-0.1, 0.2, -0.3, 0.4};
  for (int i = 0; i < 4; ++i) {
    const std::string id = "r" + std::to_string(i);
    recs.push_back({{"id", id}, {"precision", i == 3 ? "fp8" : "bf16"}, {"params_b", 7}});
    RecordRow row;
    row.id = id;
    row.error = errs[i];
    rows.push_back(row);
  }
  std::map<std::string, ClassError> by;
  for (const auto& c : errors_by_class(rows, recs)) by[c.name] = c;
  EXPECT_EQ(by["all"].n, 4u);
  EXPECT_NEAR(by["all"].median, 0.25, 1e-12);
  EXPECT_NEAR(by["all"].p90, 0.37, 1e-12);
  EXPECT_EQ(by["dense 16-bit"].n, 3u);
  EXPECT_NEAR(by["dense 16-bit"].median, 0.2, 1e-12);
  EXPECT_EQ(by["FP8"].n, 1u);
  EXPECT_NEAR(by["FP8"].p90, 0.4, 1e-12);
  EXPECT_EQ(by["MoE"].n, 0u);
}

// Every record once, and no leak: multiplying one record's published figure by 3 changes the
// fits of the folds it trains, but not its own held-out prediction.
TEST(PlanCrossValidate, EachRecordPredictedOnceWithoutItsOwnFigure) {
  nlohmann::json all = nlohmann::json::parse(read_file(kRuns));
  nlohmann::json some = nlohmann::json::array();
  for (const auto& r : all)
    if (r.value("category", std::string()) == "benchmark" && some.size() < 40) some.push_back(r);
  const CrossValidation a = cross_validate(some, 4, 30);
  const Validation plain = validate_records(some);
  ASSERT_EQ(a.held_out.size(), plain.rows.size());
  std::map<std::string, int> seen;
  for (const auto& row : a.held_out) ++seen[row.id];
  for (const auto& row : plain.rows) EXPECT_EQ(seen[row.id], 1) << row.id;
  std::map<int, int> per_fold;
  for (int f : a.fold_of) ++per_fold[f];
  EXPECT_EQ(per_fold.size(), 4u);  // 40 ids hash into every fold

  const std::string victim = a.held_out[0].id;
  nlohmann::json changed = some;
  for (auto& r : changed)
    if (r["id"] == victim) {
      for (const char* k : {"tokens_per_s_per_gpu", "tflops_per_gpu", "mfu"})
        if (r[k].is_number()) r[k] = r[k].get<double>() * 3;
    }
  const CrossValidation b = cross_validate(changed, 4, 30);
  ASSERT_EQ(b.held_out.size(), a.held_out.size());
  int moved = 0;
  for (size_t i = 0; i < a.held_out.size(); ++i) {
    ASSERT_EQ(a.held_out[i].id, b.held_out[i].id);
    if (a.held_out[i].id == victim) {
      EXPECT_DOUBLE_EQ(a.held_out[i].predicted, b.held_out[i].predicted) << "the held-out record leaked into its fit";
      EXPECT_NEAR(b.held_out[i].published, 3 * a.held_out[i].published, 1e-9 * b.held_out[i].published);
    } else if (a.fold_of[i] != a.fold_of[0] && a.held_out[i].predicted != b.held_out[i].predicted) {
      ++moved;
    }
  }
  EXPECT_GT(moved, 0) << "the changed record should move the fits of the folds that train on it";
}

TEST(PlanCrossValidate, CliTableAndErrors) {
  int status = 0;
  std::string out = run_cli("plan --cross-validate " + kRuns + " --folds 2 --iterations 20", &status);
  EXPECT_EQ(status, 0) << out;
  for (const char* c : {"all", "dense 16-bit", "FP8", "MoE", "> 4k GPUs", "< 1B params", "2-fold"})
    EXPECT_NE(out.find(c), std::string::npos) << c << " missing from\n" << out;
  out = run_cli("plan --cross-validate " + kRuns + " --folds 1", &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("--folds"), std::string::npos) << out;
  EXPECT_THROW(cross_validate(nlohmann::json::object(), 5, 10), Error);
}

}  // namespace
}  // namespace ft::plan

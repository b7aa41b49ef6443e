// Published training runs (the JSON schema of configs/planner/published-runs-dev.json) as planner
// jobs, and the planner's prediction for one, in the record's own conventions.
//
//   nlohmann::json rec = nlohmann::json::parse(read_file("run.json"));
//   RecordJob rj = job_from_record(rec);        // ft::Error: "not enough information: ..."
//   nlohmann::json p = predict_record(rec);     // what `fluxtrain plan --from-record` prints
//   p["tokens_per_s_per_gpu"], p["tflops_per_gpu"], p["mfu"], p["step_time_s"], ...
//
// Fields a record leaves open (micro-batch, recompute, ZeRO stage, virtual stages, sometimes
// the global batch) are chosen the way a tuned run would choose them: the fastest layout that
// fits in memory. The prediction lists them under "chosen".
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "plan/plan.h"

namespace ft::plan {

struct RecordJob {
  std::string id;
  Job job;
  LayoutSpec fixed;  // what the record states
  bool global_batch_known = true;
  // The figure is wall-clock throughput (tokens over the run's days, restarts, evaluation and
  // checkpoints included: `throughput_basis` = "wall_clock"), so it is compared with the planner's
  // throughput times its goodput (plan/goodput.h) rather than with the step's.
  bool wall_clock_figure = false;
  std::vector<std::string> notes;  // how open or odd fields were read
};

// Throws ft::Error naming the record and every missing field when the record lacks a model
// shape, a sequence length, a GPU count or a GPU type the catalog knows.
RecordJob job_from_record(const nlohmann::json& rec);

// The figure a record publishes for throughput, in the order the validation compares them:
// tokens/s per GPU, else TFLOP/s per GPU (in the record's convention), else MFU.
struct PublishedFigure {
  std::string metric;  // "tokens_per_s_per_gpu", "tflops_per_gpu", "mfu"
  double value = 0;
};
std::optional<PublishedFigure> published_figure(const nlohmann::json& rec);

// The planner's best layout for a record (the fastest that fits; if none fits, the one with the
// least memory) and the job it was planned for (the global batch may have been chosen).
struct RecordPrediction {
  Job job;
  PlanResult plan;
  bool fits = true;
};
RecordPrediction predict(const RecordJob& rj);

// A prediction expressed as the published figure's metric (tokens/s per GPU, TFLOP/s per GPU
// in the record's convention, or MFU against the record's assumed peak).
double predicted_figure(const nlohmann::json& rec, const RecordJob& rj, const RecordPrediction& p,
                        const std::string& metric);

// The prediction: at least tokens_per_s_per_gpu, tflops_per_gpu (in the record's
// tflops_convention when it names one), mfu (against the record's peak_tflops_assumed when
// given), step_time_s, memory_per_gpu_gb; plus the chosen layout and, when the record
// publishes a figure, {"comparison": {metric, predicted, published, error}}.
nlohmann::json predict_record(const nlohmann::json& rec);

// A record's or claim's numeric field: nullopt where it is absent, null or not a number.
std::optional<double> number_field(const nlohmann::json& r, const char* key);

// ASCII lower case ("BF16" -> "bf16"): records spell precisions and conventions either way.
std::string to_lower(std::string s);

// Network bandwidth per GPU (bytes/s) read from an "interconnect" description such as
// "8x HDR InfiniBand 200 Gb/s HCAs per node" or "RoCE 400 Gb/s per GPU"; 0 when none.
double network_bw_from_text(const std::string& text, int64_t gpus_per_node);

}  // namespace ft::plan

// The HTML run report of `fluxtrain report RUN_DIR`: one self-contained file (inline CSS and
// SVG, no scripts, nothing fetched) with a summary table and plots of training and validation
// loss, validation bits/char, tokens/s, learning rate and gradient norm against step; goodput,
// stragglers' cost and, under the supervisor, its restarts and recovery times.
//
//   std::string path = obs::write_run_report("runs/r1", "");   // → runs/r1/report.html
//
// The run directory must exist and hold metrics.jsonl, else an ft::Error says which is missing.
#pragma once

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "obs/badput.h"
#include "obs/metrics_reader.h"

namespace ft::obs {

// What the supervisor recorded about the whole job (RUN_DIR/supervisor.jsonl), when it ran one.
struct JobSummary {
  bool present = false;
  double goodput = NAN, productive_s = NAN, wall_s = NAN;  // its "finished" event
  int restarts = 0;
  std::vector<std::string> failures;  // "attempt 1: hang (rank 2 on node3)"
  std::vector<double> recovery_s;
  // The job's badput: the supervisor's "finished" event, else RUN_DIR/badput.json, else the last
  // metrics.jsonl row (obs/badput.h); nullopt when none has it.
  std::optional<BadputTotals> badput;
};
JobSummary read_job_summary(const std::string& supervisor_jsonl);  // absent file: present = false

std::string render_report_html(const std::string& title, const std::vector<MetricsRecord>& records,
                               const JobSummary& job = {});

// Reads RUN_DIR/metrics.jsonl, writes the report atomically to out_path ("" = RUN_DIR/report.html),
// returns the path written.
std::string write_run_report(const std::string& run_dir, const std::string& out_path);

}  // namespace ft::obs

// Reading RUN_DIR/metrics.jsonl, the canonical per-step log: one JSON object per line with
// step, loss, lr, grad_norm, tokens, tokens_per_s, step_s, mfu, data_wait_s, goodput and, on
// evaluation steps, val_loss and val_bpc (skipped, straggler_cost_s and productive_s when present). Absent or null
// values read as NaN.
//
//   std::vector<obs::MetricsRecord> recs = obs::read_metrics_jsonl("runs/r1/metrics.jsonl");
//
// A step logged twice (a resumed run, or a separate evaluation line) merges: the later line's
// fields win. Records come back sorted by step.
// A truncated last line (the writer was killed mid-line) is skipped with a warning; any other
// malformed line is an ft::Error naming the file and line.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ft::obs {

struct MetricsRecord {
  int64_t step = 0;
  double loss = NAN, lr = NAN, grad_norm = NAN, tokens = NAN, tokens_per_s = NAN, step_s = NAN, mfu = NAN,
         data_wait_s = NAN, val_loss = NAN, val_bpc = NAN;
  double skipped = NAN;           // 1 when the guards skipped the step's update
  double goodput = NAN;           // rank 0's goodput ratio after the step (obs/badput.h)
  double straggler_cost_s = NAN;  // what stragglers cost the step (obs/straggler.h)
  double productive_s = NAN;      // what the step counts as productive time (obs/badput.h)
  // Per data source (val_bpc_ru, val_bpc_en, ...: a mixture's sources or the dataset's languages).
  std::map<std::string, double> val_bpc_by_source;
};

std::vector<MetricsRecord> read_metrics_jsonl(const std::string& path);

}  // namespace ft::obs

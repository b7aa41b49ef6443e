// Goodput: productive training time over wall time since the job began, restarts and lost steps
// counted. Productive time is the wall time of the steps that count — each step of the final run
// once, an update that was skipped not at all; everything else (start-up, evaluation, checkpoint
// stalls, steps redone after a restart, waiting for a host, restarting) is lost.
//
// Under the supervisor (`fluxtrain launch`) the job began when the supervisor started
// (FLUXTRAIN_JOB_STARTED_AT, Unix seconds) and the productive time of the earlier attempts up to
// the checkpoint this attempt resumed from is FLUXTRAIN_PRODUCTIVE_S; without it the job began
// with this process.
//
//   Goodput g = Goodput::from_env();
//   g.add_step(step_s, /*productive=*/!skipped);
//   g.ratio(unix_seconds());               // fluxtrain_goodput_ratio, metrics.jsonl "goodput"
//
//   double p = productive_seconds(records, up_to_step);  // the supervisor, from metrics.jsonl
#pragma once

#include <cstdint>
#include <vector>

#include "obs/metrics_reader.h"

namespace ft::obs {

class Goodput {
 public:
  Goodput(double job_started_at, double productive_before_s)
      : started_(job_started_at), productive_(productive_before_s) {}
  static Goodput from_env();  // now and 0 when not under the supervisor

  void add_step(double step_s, bool productive) {
    if (productive && step_s > 0) productive_ += step_s;
  }
  double productive_s() const { return productive_; }
  double job_started_at() const { return started_; }
  double ratio(double now) const;  // in [0, 1]

 private:
  double started_ = 0, productive_ = 0;
};

// Seconds of the steps that count up to and including `up_to_step` (all when < 0): each step's
// last line (a restarted run's later lines replace the lost attempt's), skipped updates left out.
double productive_seconds(const std::vector<MetricsRecord>& records, int64_t up_to_step = -1);

}  // namespace ft::obs

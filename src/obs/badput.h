// Badput: every second of a job's wall time, productive or in a named bucket. A process is always
// in one phase; entering another charges the time since the last change to the phase it leaves, so
// the buckets plus the productive time equal the wall time by construction. A step's time splits
// into its data wait and its productive rest; what stragglers cost it (rank 0 learns it after the
// step) and the steps a rollback or restart throws away are moved out of productive time later.
//
//   Badput b = Badput::from_env(unix_now());       // the job's start, or the last attempt's totals
//   b.step_begins(t0);                              // start-up (or restart) ends here on the first step
//   b.step_ends(t1, step, data_wait_s, skipped);
//   b.straggled(step, cost_s);                      // rank 0, from the ranks' compute times
//   b.enter(BadputKind::kEval, t);  ...  b.enter(BadputKind::kOther, t2);
//   b.roll_back(to_step);                           // the steps after it become lost work
//   BadputTotals t = b.totals(now);                 // metrics.jsonl "badput", /metrics, badput.json
//
// Across attempts (`fluxtrain launch`) the supervisor passes FLUXTRAIN_JOB_STARTED_AT and, on a
// restart, FLUXTRAIN_BADPUT_BEFORE: the totals of the last row the failed attempt wrote, with the
// productive time of its steps after the resumed checkpoint moved to lost work
// (carry_over_restart). The new process charges the time from that row to its first step to
// "restart". docs/operations.md ("Goodput and badput") lists the buckets.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "obs/metrics_reader.h"

namespace ft::obs {

enum class BadputKind : uint8_t {
  kStartup,     // launch to the first step of the job
  kRestart,     // the last row of a failed attempt (or a rollback) to the first new step
  kDataWait,    // waiting for a batch inside a step
  kCheckpoint,  // the training stall of checkpoint saves (the asynchronous part is not a stall)
  kEval,        // validation
  kStraggler,   // what slower ranks cost each step (rank 0)
  kLostWork,    // steps thrown away by a restart or a rollback (redone later)
  kSkipped,     // steps whose update the guards skipped
  kOther,       // between steps: metrics, logging, heartbeats, the stop agreement, shutdown
  kCount
};
inline constexpr size_t kNumBadputKinds = static_cast<size_t>(BadputKind::kCount);
const char* badput_kind_name(BadputKind k);  // "startup", "data_wait", ...

struct BadputTotals {
  double started_at = 0;  // the job's start (Unix seconds)
  double at = 0;          // accounted up to here
  double productive_s = 0;
  std::array<double, kNumBadputKinds> seconds{};

  double wall_s() const { return at - started_at; }
  double bad_s() const;
  double goodput() const;  // productive over wall, in [0, 1]
  nlohmann::json to_json() const;
  // Throws ft::Error naming `what` and the bad field.
  static BadputTotals from_json(const nlohmann::json& j, const std::string& what);
};

class Badput {
 public:
  // From `started_at` on, time is charged to `first` until the first step begins.
  Badput(BadputTotals before, BadputKind first);
  // FLUXTRAIN_BADPUT_BEFORE (a restart), else FLUXTRAIN_JOB_STARTED_AT, else the process's start.
  static Badput from_env(double now);

  void enter(BadputKind phase, double now);
  void step_begins(double now);
  void step_ends(double now, int64_t step, double data_wait_s, bool skipped);
  void straggled(int64_t step, double cost_s);
  void roll_back(int64_t to_step);
  double step_productive_s(int64_t step) const;  // after straggler costs; 0 when skipped or unknown
  BadputTotals totals(double now);               // charges the current phase up to `now`

 private:
  void charge(double now);
  BadputTotals t_;
  int phase_;                                  // a BadputKind, or kStepPhase
  std::map<int64_t, double> step_productive_;  // this process's steps still counted productive
};

// The supervisor's side of a restart: the totals of the last row (`last_row_totals`) with the
// productive time of the steps after `resume_step` moved to lost work. `records` are the merged
// rows of metrics.jsonl (read_metrics_jsonl), whose productive_s says what each step counts.
BadputTotals carry_over_restart(BadputTotals last_row_totals, const std::vector<MetricsRecord>& records,
                                int64_t resume_step);
// The "badput" object of the last line of metrics.jsonl that has one; nullopt when none.
std::optional<BadputTotals> last_badput_row(const std::string& metrics_path);

// "checkpoint 3.2 s, startup 1.9 s, ...": the non-zero buckets, largest first.
std::string badput_summary(const BadputTotals& t);

double process_started_at();  // Unix seconds, captured before main()

}  // namespace ft::obs

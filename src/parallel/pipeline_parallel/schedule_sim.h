// Checking and timing a schedule without a model: simulate() executes every stage's action list
// the way PipelineRunner does — receives are posted without blocking, sends never block, a
// computation waits until the message it needs has been sent — with fixed costs per computation
// and free communication. It throws ft::Error, naming the stage and action, when
//   - a stage runs a chunk it does not hold, or a computation twice, or not at all;
//   - a computation's input was never received, or a send precedes its computation;
//   - messages of one tag would be matched out of order (MPI matches (peer, tag) in order), or a
//     send has no receive;
//   - no stage can move while some still have actions (deadlock), naming where each one waits;
//   - a stage holds more activation sets than the schedule's in_flight_bound.
//
//   ScheduleReport r = simulate(make_schedule(PipelineSchedule::k1F1B, 4, 8, 1));
//   std::cout << timeline(s, r) << r.bubble;    // 0.2727... = 3 / 11
#pragma once

#include <string>
#include <vector>

#include "parallel/pipeline_parallel/schedule.h"

namespace ft {

struct SimCosts {
  double forward = 1, backward = 1;  // time units per computation of one (micro-batch, chunk)
  // Optional, per chunk (overriding the two above): e.g. each chunk's forward and backward FLOPs.
  std::vector<double> chunk_forward{}, chunk_backward{};
};

struct ScheduleReport {
  struct Span {
    double start = 0, end = 0;  // computations only; communication is instantaneous
  };
  std::vector<std::vector<Span>> times;  // per stage, per action (zero-length for communication)
  std::vector<double> busy;              // per stage: time spent computing
  std::vector<int> max_in_flight;        // per stage: most activation sets held at once
  double makespan = 0;                   // the last computation's end (every stage starts at 0)
  double bubble = 0;                     // idle / total = 1 − Σ busy / (stages · makespan)
};

ScheduleReport simulate(const Schedule& s, SimCosts costs = {});

// The schedule as text: one row per stage, one column per time unit; "F3" is the forward of
// micro-batch 3, "B3" its backward, with virtual stages "F3.1" is micro-batch 3 on the stage's
// chunk 1; "." is idle. Costs above 1 repeat the label's cell as "~".
std::string timeline(const Schedule& s, const ScheduleReport& r);

}  // namespace ft

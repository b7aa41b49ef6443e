// fluxtrain schedule — prints a pipeline schedule as a text timeline with its bubble fraction,
// simulated from the same action lists the trainer executes (no model, no ranks).
//
//   fluxtrain schedule --pp 4 --micro-batches 8 --schedule 1f1b
//   fluxtrain schedule --pp 4 --micro-batches 8 --schedule interleaved --virtual-stages 2
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/command.h"
#include "parallel/pipeline_parallel/schedule_sim.h"
#include "util/error.h"

namespace {

int run_schedule(int argc, char** argv) {
  CLI::App app{"Print a pipeline schedule: fluxtrain schedule --pp P --micro-batches M --schedule KIND"};
  int pp = 4, micro = 8, virtual_stages = 1;
  double backward_cost = 1;
  std::string kind = "1f1b";
  bool actions = false;
  app.add_option("--pp", pp, "pipeline stages")->capture_default_str()->check(ft::cli::at_least(1));
  app.add_option("--micro-batches", micro, "micro-batches per step")
      ->capture_default_str()
      ->check(ft::cli::at_least(1));
  app.add_option("--schedule", kind, "gpipe, 1f1b or interleaved")->capture_default_str();
  app.add_option("--virtual-stages", virtual_stages, "model chunks per stage (interleaved)")
      ->capture_default_str()
      ->check(ft::cli::at_least(1));
  app.add_option("--backward-cost", backward_cost, "time of a backward relative to a forward")->capture_default_str();
  app.add_flag("--actions", actions, "also list every stage's actions (with sends and receives)");
  FT_PARSE(app, argc, argv);

  ft::PipelineSchedule k;
  if (kind == "gpipe")
    k = ft::PipelineSchedule::kGPipe;
  else if (kind == "1f1b")
    k = ft::PipelineSchedule::k1F1B;
  else if (kind == "interleaved")
    k = ft::PipelineSchedule::kInterleaved;
  else
    throw ft::Error(fmt::format("--schedule {}: unknown schedule", kind), "use gpipe, 1f1b or interleaved");
  if (!(backward_cost > 0)) throw ft::Error(fmt::format("--backward-cost {} must be > 0", backward_cost));

  ft::Schedule s = ft::make_schedule(k, pp, micro, virtual_stages);
  ft::ScheduleReport r = ft::simulate(s, {1.0, backward_cost});  // throws on any inconsistency
  std::fputs(ft::timeline(s, r).c_str(), stdout);
  if (actions) {
    for (int st = 0; st < s.stages; ++st) {
      std::printf("stage %d:", st);
      for (const ft::PipelineAction& a : s.actions[static_cast<size_t>(st)])
        std::printf(" %s(%d,%d)", ft::action_name(a.kind), a.mb, a.chunk);
      std::printf("\n");
    }
  }
  std::printf("activation sets in flight per stage (max):");
  for (int n : r.max_in_flight) std::printf(" %d", n);
  std::printf("\nchecked: every send has its receive in order, no deadlock, in-flight within bounds\n");
  std::printf("bubble fraction %.4f (simulated), %.4f (theory %s)\n", r.bubble,
              ft::theoretical_bubble(k, pp, micro, virtual_stages),
              k == ft::PipelineSchedule::kInterleaved ? "(p-1)/(v*m+p-1)" : "(p-1)/(m+p-1)");
  return 0;
}

ft::cli::Register register_schedule("schedule", "print a pipeline schedule's timeline and bubble fraction",
                                    run_schedule);

}  // namespace

// The timed CPU: the CPU's own backend (backends/cpu) with every op wrapped so that, while timing
// is on, each call is recorded with its shapes, bytes and FLOPs (backends/trace/op_costs.h, the
// recording GPU's cost functions) and the seconds the CPU op took (at 1 thread the process's CPU
// time over the call, at most its wall clock: a profile taken beside other processes is not
// stretched by its waits for a core; above 1 thread the wall clock). Registered only by
// what profiles a step (`fluxtrain plan --profile`, dryrun/step_trace.h), never by a training run:
// the ops compute exactly as the CPU's do, so the timed step is the real step.
//
//   timing::register_timed_cpu();                  // Device::kCPU's ops are now timed
//   ... build the model, warm up ...
//   timing::start_timing();  <one step>;  std::vector<plan::OpRecord> ops = timing::stop_timing();
//   ops[i].seconds;                                // measured; ops[i].shape, .flops, .bytes()
#pragma once

#include <vector>

#include "plan/op_trace.h"

namespace ft::timing {

// Registers the timed CPU as Device::kCPU's backend (idempotent; the CPU's ops stay the ones run).
void register_timed_cpu();
// Times every op call from now on (clearing what was recorded before).
void start_timing();
// Stops timing; the calls timed, in call order, each with its seconds.
std::vector<plan::OpRecord> stop_timing();

// A span of host work (a whole step) timed as each op is: at 1 thread the least of the wall clock
// and the process's CPU time, above 1 thread the wall clock.
class StepClock {
 public:
  StepClock();
  double seconds() const;

 private:
  bool single_;
  double wall_ = 0, cpu_ = 0;
};

}  // namespace ft::timing

// Pipeline schedules as data. A schedule is, for every stage, the list of actions that stage
// executes in order: receive an activation, run a forward, send an activation, and the same for
// gradients. It is generated here, checked and timed by simulate() (schedule_sim.h) and executed
// by PipelineRunner (runner.h) with one short loop — the same table drives all three.
//
//   Schedule s = make_schedule(PipelineSchedule::k1F1B, /*stages=*/4, /*micro_batches=*/8, 1);
//   for (const PipelineAction& a : s.actions[stage]) ...   // e.g. {kForward, mb 3, chunk 1}
//
// The model is cut into stages · virtual_stages chunks; chunk k runs on stage k % stages (with
// virtual stages, stage s holds chunks s, s + stages, s + 2·stages, ...: Megatron's interleaving).
// Activations flow chunk k → k + 1, gradients k + 1 → k.
//
// Generated orders (stage s of p, m micro-batches, v chunks per stage):
//   gpipe        F0 … F(m−1), then B0 … B(m−1)
//   1f1b         min(m, p−1−s) warm-up forwards, then alternate F and B, then the remaining Bs;
//                at most min(m, p − s) micro-batches are in flight on stage s
//   interleaved  forwards in groups of p micro-batches, chunk by chunk (group 0 on chunk 0, group 0
//                on chunk 1, …, then group 1); backwards the same with the chunks reversed;
//                W_s = min(m·v, 2(p−1−s) + (v−1)·p) warm-up forwards, then alternate; needs m % p == 0
// A receive is placed right after the previous computation (so it is posted before it is needed)
// and a send right after the computation that produced the data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parallel/parallel_config.h"

namespace ft {

// What one step of a stage's schedule does (kept apart from the kernels' ops by its name).
enum class PipelineActionKind : uint8_t { kRecvActivation, kForward, kSendActivation, kRecvGrad, kBackward, kSendGrad };
const char* action_name(PipelineActionKind op);  // "recv_act", "forward", ...

struct PipelineAction {
  PipelineActionKind kind;
  int mb;     // micro-batch
  int chunk;  // model chunk, 0 .. stages · virtual_stages − 1
  bool operator==(const PipelineAction& o) const { return kind == o.kind && mb == o.mb && chunk == o.chunk; }
};

struct Schedule {
  PipelineSchedule kind = PipelineSchedule::k1F1B;
  int stages = 1, micro_batches = 1, virtual_stages = 1;
  bool training = true;                              // false: forwards only (evaluation)
  std::vector<std::vector<PipelineAction>> actions;  // per stage, in execution order
  // Per stage, the most micro-batch activation sets (one per (micro-batch, chunk)) the schedule
  // claims to hold at once; simulate() checks it.
  std::vector<int> in_flight_bound;

  int chunks() const { return stages * virtual_stages; }
  int stage_of(int chunk) const { return chunk % stages; }
  int local_chunk(int chunk) const { return chunk / stages; }  // index among the stage's chunks
  std::string describe() const;                                // "1f1b, 4 stages, 8 micro-batches"
};

// Throws ft::Error for impossible arguments (non-positive sizes, virtual stages without the
// interleaved schedule, interleaved with m not a multiple of p).
Schedule make_schedule(PipelineSchedule kind, int stages, int micro_batches, int virtual_stages);
// Forwards only, in the order the training schedule runs them (validation passes).
Schedule make_forward_schedule(PipelineSchedule kind, int stages, int micro_batches, int virtual_stages);

// Message tags: activations sent by chunk k carry 2k, gradients sent by chunk k carry 2k + 1.
// Messages of one tag between two ranks are matched in order (MPI's rule), which simulate()
// checks against the order of the receives.
int activation_tag(int sender_chunk);
int grad_tag(int sender_chunk);

// The textbook bubble fraction (idle / total stage time) with equal forward and backward times:
// (p−1)/(m+p−1) for gpipe and 1f1b, (p−1)/(v·m+p−1) for interleaved.
double theoretical_bubble(PipelineSchedule kind, int stages, int micro_batches, int virtual_stages);

}  // namespace ft

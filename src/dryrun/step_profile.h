// Profile mode's two halves on the trainer's side (the profile itself is plan/profile.h):
//   profile_step_ops     the config's real training step timed op by op on this machine's CPU
//                        (trace_training_step with timed_on_host), at each thread count asked,
//                        for the config's layout (each of its cp ranks), for one rank holding the
//                        whole model, and for the cp = 2 ranks of each attention schedule;
//   predict_with_profile every rank of a layout traced on the recording GPU (its ops with shapes,
//                        its collectives per mesh axis), each op priced by the profile
//                        (profiled_op_seconds), each collective by its axis's fitted line over
//                        the bytes the rank sends; each rank's ops stretched by the profile's
//                        untimed share (the profiled steps over their priced ops); the step
//                        is the slowest rank's compute stretched by its pipeline schedule's
//                        bubble, plus its communication — with cp > 1 the cp group's transfers
//                        less what the ring's block attention hides (each overlapped K/V send
//                        up to its block's time).
//
//   plan::Profile p;  p.ops[1] = profile_step_ops(cfg, {1, 2});       // + sweep_collectives
//   ProfiledStep s = predict_with_profile(cfg, p, /*threads=*/1);
//   s.step_s;  s.compute_s;  s.comm_s_by_axis["dp"];  s.measured_share;
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "config/config.h"
#include "plan/profile.h"

namespace ft {

// sync (optional): called before each timed step's trace — under `--nproc N` a barrier over the N
// processes timing the same ops at once, so they run the same ops in lock-step (the contention of
// N ranks on this host).
// untimed_share (optional): by thread count, the timed steps' time beyond their ops as the op set
// prices them, (Σ step − Σ priced) / Σ priced over every layout timed (Profile::untimed_share).
std::map<int, plan::ProfileOps> profile_step_ops(const Config& cfg, const std::vector<int>& threads, int repeats = 3,
                                                 const std::function<void()>& sync = {},
                                                 std::map<int, double>* untimed_share = nullptr);

struct ProfiledStep {
  double step_s = 0;
  double compute_s = 0;                          // the slowest rank's ops
  double bubble = 0;                             // the schedule's idle fraction (pipeline)
  std::map<std::string, double> comm_s_by_axis;  // that rank's collectives by axis ("cp": its exposed part)
  // Context parallelism (cp > 1): the bytes the rank sends on the cp group (the ring's K/V and dK/dV
  // blocks or the all-to-all's exchanges, and the step's sums: what the dry run counts), their
  // seconds on the cp axis's fits, and the part no block attention hides (in step_s).
  double cp_bytes = 0, cp_s = 0, cp_exposed_s = 0;
  int slowest_rank = 0;
  int threads = 1;                        // the profile's thread count used
  std::vector<double> compute_s_by_rank;  // every rank's ops (compute_s is the slowest rank's)
  int concurrency_wanted = 1;             // the layout's ranks on this host computing at once
  int concurrency = 1;                    // the profile's concurrency used (the nearest timed to the wanted)
  double measured_share = 0;              // of the compute seconds, the share priced by an exact (op, shape)
  // The profile's untimed share at the op set used (Profile::untimed_share): each rank's compute is
  // its ops' seconds x (1 + it), the trace's fills and copies then not priced apart (the measured
  // steps' time beyond their priced ops holds them).
  double untimed_share = 0;
  double oversubscription = 1;  // ranks x threads / CPUs when above 1 (compute stretched by it)
  int64_t op_calls = 0;
};

// threads: the host threads each rank of the layout computes with; cpus: the CPUs the ranks share
// (0: enough for all) — when ranks x threads exceed them, every op takes ranks x threads / cpus as
// long (the cores are time-shared). The ops are priced from the profile's ops timed at the
// layout's concurrency: its ranks on this host that compute at once, min(ranks, cpus / threads)
// (at least 1; cpus 0: every rank), else at the nearest concurrency timed.
// ft::Error when the profile lacks a collective the layout makes.
ProfiledStep predict_with_profile(const Config& cfg, const plan::Profile& profile, int threads, int cpus = 0);

}  // namespace ft

// Dry run (`fluxtrain train --dry-run --world-size N`): one process plans every rank of a layout —
// e.g. 128 ranks of dp 16 × tp 8 for a 7B model — without starting ranks or allocating the model:
// for each world rank it takes its mesh coordinates (Mesh::coord_of), its
// pipeline stage's part of the schedule, its parameter layout (shapes only: ParamLayout is a
// description of the arena, not the arena) and its ZeRO shard plan, then
//   - memory: the planner's accounting for its pipeline stage (plan::estimate_stage_memory — the
//     one `fluxtrain plan` reports, so the two agree by construction), and
//   - communication per training step: the collectives Trainer::step, the engines, the model
//     and the pipeline issue on each group, recorded from the real step's code (the step trace,
//     dryrun/step_trace.h, of one rank per pipeline stage) and replayed for the rank's place in
//     its groups by the fake communicators' counts of the MPI communicator's ring algorithms.
//
// Beside the bytes it puts the planner's time for each axis's communication
// (plan::estimate_step_time: tp_comm, pp_comm, dp_comm and its exposed part), so a cluster's NCCL
// traffic per axis and step can be read against what the plan assumed.
//
//   DryRun d = dry_run(cfg, 128, plan::find_gpu("a100-80gb"));
//   fmt::print("{}", format_dry_run(d));   // one line per distinct kind of rank, then the totals
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "parallel/comm/comm.h"
#include "parallel/mesh.h"
#include "plan/catalog.h"
#include "plan/job.h"
#include "plan/memory_estimate.h"
#include "plan/time.h"

namespace ft {

struct DryRunRank {
  int rank = 0;
  MeshCoord coord;
  int64_t arena = 0;             // elements of its parameter arena (its stage, its tp shard, padded)
  int64_t shard = 0;             // elements of its ZeRO shard of that arena
  int in_flight = 1;             // micro-batches the schedule keeps on its stage at most
  plan::MemoryBreakdown memory;  // bytes, by category
  CommStats dp, tp, pp, world;   // bytes it sends per training step, per group (dp: over dp and dp × cp)
  CommStats cp;                  // on the cp group: the ring's K/V and dK/dV blocks or the all-to-alls, the loss sums
};

struct DryRun {
  Config cfg;
  plan::Job job;
  plan::Layout layout;
  int64_t micro_batches = 1;      // per rank and step
  std::string schedule;           // the pipeline schedule, described ("" without pp)
  std::vector<DryRunRank> ranks;  // every world rank
  plan::StepTime time;            // the planner's step time of this layout on the device
};

// One mesh axis's collectives per training step: bytes from the ranks' fake communicators, time
// from the planner.
struct AxisTraffic {
  std::string axis;   // "dp", "tp", "pp", "cp"
  int64_t group = 1;  // ranks per group of the axis
  double max_rank_bytes = 0, total_bytes = 0;
  double planner_bytes = 0;      // the planner's bytes for the rank it times (plan::rank_traffic)
  double planner_s = 0;          // the planner's seconds for this axis's communication per step
  double planner_exposed_s = 0;  // the part of it the step waits for (dp: the rest hides behind backward)
};
// dp, tp, pp, and cp when parallel.cp > 1.
std::vector<AxisTraffic> axis_traffic(const DryRun& d);

// The most ranks a dry run plans: each is a line of its JSON (with its groups' members) and a
// place in the table's groups; a larger world is refused with a hint, not planned for minutes.
inline constexpr int64_t kMaxDryRunRanks = 65536;

// Throws ft::Error when world_size is not dp × cp × tp × pp, is above kMaxDryRunRanks, or the layout
// cannot run.
DryRun dry_run(const Config& cfg, int64_t world_size, const plan::GpuSpec& device);

std::string format_dry_run(const DryRun& d);
nlohmann::json dry_run_json(const DryRun& d);

}  // namespace ft

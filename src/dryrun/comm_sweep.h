// The collectives of each mesh axis timed over the ranks this process was launched with (under
// mpirun: `fluxtrain plan --profile --nproc N`): for every axis of more than one rank, each
// collective the training step makes on it (all-reduce, reduce-scatter, all-gather; sends over pp;
// with cp > 1 the cp group's ring hop — each rank sending to the next while it receives from the
// previous, as the ring's K/V and dK/dV blocks and the all-to-all's pairwise exchanges move — as
// its "send", and the dp × cp gradient group "dp_cp")
// at sizes swept from 4 KiB to 16 MiB, the least of a few calls, the slowest rank of the group; a
// latency + bandwidth line fitted per axis and collective over the bytes one rank sends
// (FakeCommunicator::bytes_sent: the same bytes the step trace's collectives are priced by).
//
//   Ranks ranks(cfg.parallel, run_dir);
//   auto fits = sweep_collectives(ranks.mesh());   // {"dp": {"all_reduce": {latency, bw, points}}}
#pragma once

#include <map>
#include <string>

#include "parallel/mesh.h"
#include "plan/profile.h"

namespace ft {

// Collective over the world (every rank calls it). Axes of one rank are left out.
std::map<std::string, std::map<std::string, plan::CollectiveFit>> sweep_collectives(Mesh& mesh, int repeats = 3);

// The profile's name of a collective ("all_reduce", "reduce_scatter", "all_gather", "send"), or ""
// for those that are not priced by their own line (recv: the matching send's time; barrier,
// broadcast: priced as an all-reduce of their bytes).
std::string profile_collective_name(plan::CollOp op);

}  // namespace ft

// What the supervisor knows of each rank when a job fails — its last heartbeat (phase, step, when),
// its process now (this machine: /proc; a remote host: one ssh for all its ranks), its host and its
// (dp, tp, pp, cp) coordinates — and the ranks that stayed silent: a rank that never reported the
// failure its peers' collectives timed out on (heartbeat phase "failed") and whose process is gone
// or stopped is the one they waited for, whatever the launcher or the first reporter says.
//
//   std::vector<RankSeen> seen = ...;             // from the attempt's heartbeats (Supervisor::seen)
//   probe_processes(seen, 5);                     // fills RankSeen::state
//   for (const RankSeen& r : seen) log_warn("{}", describe(r, detected_at));
//   event["culprits"].push_back(to_json(r, detected_at));
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "parallel/mesh.h"  // defines: MeshCoord

namespace ft {

// A rank's process as the probe saw it.
enum class ProcState : uint8_t { kUnknown, kRunning, kStopped, kGone };
const char* proc_state_name(ProcState s);  // "unknown", "running", "stopped" (SIGSTOP), "gone"

struct RankSeen {
  int rank = 0;
  std::string host;  // the host it runs on (its heartbeat's, or where the launcher placed it)
  int64_t pid = 0;   // 0: never reported (no heartbeat)
  bool local = false;
  MeshCoord coord;
  std::string phase;   // its last heartbeat's: starting, ready, train, failed, done, ... ("" = none)
  int64_t step = 0;    // that heartbeat's step (phase train: the last completed step)
  double beat_at = 0;  // Unix seconds of that heartbeat
  ProcState state = ProcState::kUnknown;
};

// Fills `state` of every rank with a pid: local ones from /proc, remote ones by one
// `ssh HOST` per host (all hosts in parallel, each bounded by timeout_s; unknown when it fails).
void probe_processes(std::vector<RankSeen>& ranks, double timeout_s);

// The ranks (indices into `ranks`) that did not report the failure (phase "failed"), did not finish
// or stop on request, and whose process is gone or stopped; empty when every rank reported, or when
// nobody did (then silence says nothing).
std::vector<size_t> silent_casualties(const std::vector<RankSeen>& ranks);

// "rank 2 on node7 (dp 1, tp 0, pp 0, cp 0): phase train after step 12, its last heartbeat 4.1 s
// before the failure was detected; process stopped"
std::string describe(const RankSeen& r, double detected_at);
// {"rank", "host", "dp", "tp", "pp", "cp", "phase", "step", "beat_age_s", "process"}
nlohmann::json to_json(const RankSeen& r, double detected_at);

}  // namespace ft

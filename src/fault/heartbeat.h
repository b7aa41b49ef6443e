// Heartbeat: each rank's sign of life for the supervisor (`fluxtrain launch`). When the
// supervisor starts a job it sets FLUXTRAIN_HEARTBEAT_DIR (and FLUXTRAIN_ATTEMPT); every rank
// then rewrites DIR/rank-<r>.json (temporary name + rename, so a reader never sees half a
// record) when it starts, when it is ready to train (after a resume) and after every step:
//
//   {"rank": 3, "host": "node7", "pid": 4242, "attempt": 2, "phase": "train", "step": 118,
//    "start_step": 100, "time": 1718000000.25}
//
// phase: "starting" (process up, model not built), "ready" (about to run its first step; step =
// the step it resumed from), "train" (step = last completed step), "done", "stopped" (on request,
// after the checkpoint of the stop), "failed" (a communication failure; "detail" holds the rank's
// report, e.g. the ranks a collective waited for), "gpu_fault" (the rank's GPU reported an
// uncorrectable error or a fatal XID; "detail" says which: the supervisor excludes the host). The supervisor
// builds ranks.json from these records and calls a job hung when no rank's record changes for
// fault.heartbeat_timeout_s. A shared run directory makes the files visible across hosts.
//
//   auto hb = Heartbeat::from_env(world_rank);   // null unless under the supervisor
//   if (hb) hb->beat("train", step);
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace ft {

struct HeartbeatRecord {
  int rank = -1;
  std::string host;
  int64_t pid = 0;
  int64_t attempt = 0;
  std::string phase;
  int64_t step = 0, start_step = 0;
  double time = 0;     // Unix seconds when written
  std::string detail;  // phase "failed": what the rank reports
};

class Heartbeat {
 public:
  Heartbeat(std::string dir, int rank, int64_t attempt);
  // Null unless FLUXTRAIN_HEARTBEAT_DIR is set.
  static std::unique_ptr<Heartbeat> from_env(int rank);

  void beat(const std::string& phase, int64_t step, const std::string& detail = "");
  void set_start_step(int64_t s) { start_step_ = s; }

 private:
  std::string dir_, path_, host_;
  int rank_;
  int64_t attempt_, start_step_ = 0;
};

std::string heartbeat_path(const std::string& dir, int rank);

// After a communication failure (a peer died or hangs), under the supervisor only: the rank
// reports it in its heartbeat (phase "failed", its message) and waits up to wait_s — the time the
// supervisor has to read every rank's report and stack before it stops the job — then returns so
// the caller aborts. Returns at once when not under a supervisor or when wait_s is 0. `phase`:
// "failed", or "gpu_fault" for a GPU that reported a fatal error.
void report_failure_to_supervisor(int rank, const std::string& message, double wait_s,
                                  const std::string& phase = "failed");
// nullopt when the file is missing or not (yet) a complete record.
std::optional<HeartbeatRecord> read_heartbeat(const std::string& path);

double unix_seconds();
std::string this_host();

}  // namespace ft

// Stack dumps of a hung job's ranks: every thread of every rank, symbolised, read by gdb on the
// rank's own host (over ssh for remote hosts) and written to the run directory before the
// supervisor ends the job.
//
//   std::vector<RankProcess> ranks = {{.rank = 0, .host = "node1", .pid = 4242, .local = true}, ...};
//   for (const std::string& line : dump_stacks(ranks, "runs/x/stacks/attempt-1", 30))
//     log_info("{}", line);   // "rank 0 on node1 (pid 4242): 5 threads -> runs/x/.../rank-00000.txt"
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ft {

struct RankProcess {
  int rank = 0;
  std::string host;
  int64_t pid = 0;
  bool local = false;  // on this machine: gdb runs here, else over `ssh HOST`
};

// Writes DIR/rank-NNNNN.txt per rank (gdb's "thread apply all bt"; the process is attached, read
// and detached, not changed), all ranks in parallel, each bounded by timeout_s. Returns one line per
// rank saying how many threads were read, or why not.
std::vector<std::string> dump_stacks(const std::vector<RankProcess>& ranks, const std::string& dir, double timeout_s);

// The shell command that prints every thread's stack of `pid` (exposed for the tests).
std::string stack_command(int64_t pid, double timeout_s);

}  // namespace ft

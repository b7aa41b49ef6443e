// The hosts a sniff test named slow (obs/sniff.h), as the supervisor reads them at a restart for
// fault.exclude_slow_hosts: rank 0 writes <run_dir>/sniff.json after every sniff test (its latest
// verdict, train/sniffer.h); only a verdict of the attempt that just failed counts.
//
//   for (const SlowHost& h : sniffed_slow_hosts(run_dir, attempt_started)) mark_bad(h.name, h.why);
#pragma once

#include <string>
#include <vector>

namespace ft {

struct SlowHost {
  std::string name;
  std::string why;  // "GEMM 5.20x the median of its peers (rank 2, sniff after step 40)"
};

// The hosts of <run_dir>/sniff.json when it was written at or after `since` (Unix seconds); empty
// when there is none, it is older, or it cannot be read (logged: a restart does not fail for it).
std::vector<SlowHost> sniffed_slow_hosts(const std::string& run_dir, double since);

}  // namespace ft

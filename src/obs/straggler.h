// Straggler detection: a rank whose compute time per step stays above its peers' is named within
// a few steps, with what it costs the job. Every data-parallel step ends in collectives that wait
// for the slowest rank, so a rank computing 2x as long makes everyone wait; the cost of a step is
// how much longer its slowest straggler computed than the slowest healthy rank.
//
//   StragglerDetector d(hosts, {.factor = 1.25, .window = 5, .min_slow = 3});
//   StragglerReport r = d.observe(step, per_rank_compute_s);   // rank 0, every step
//   for (const Straggler& s : r.started) log_warn("{}", describe(s, r.median_s));
//   r.current;  r.cost_s;  d.total_cost_s();
//
// A rank is slow in a step when its compute time exceeds factor x the median of all ranks (and the
// median by at least min_excess_s, so microsecond steps are not judged); it is a straggler while it
// was slow in at least min_slow of the last `window` steps. Its slowdown is the median of its
// compute / median ratios over those slow steps.
#pragma once

#include <cstdint>
#include <deque>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace ft::obs {

struct StragglerOptions {
  double factor = 1.25;
  int window = 5;
  int min_slow = 3;
  double min_excess_s = 0.002;
};

struct Straggler {
  int rank = 0;
  std::string host;
  double slowdown = 0;      // its compute time over the median of all ranks
  double compute_s = 0;     // this step
  double cost_s = 0;        // this step: its compute minus the slowest healthy rank's (>= 0)
  double cost_total_s = 0;  // since it was named
  int64_t since_step = 0;   // the step it was named at
};

struct StragglerReport {
  double median_s = 0;                        // median compute time of the step
  std::vector<Straggler> current;             // stragglers now
  std::vector<Straggler> started, recovered;  // named at this step / no longer stragglers
  double cost_s = 0;                          // what stragglers cost this step (job-wide)
};

class StragglerDetector {
 public:
  StragglerDetector(std::vector<std::string> hosts, StragglerOptions o);
  StragglerReport observe(int64_t step, const std::vector<double>& compute_s);
  double total_cost_s() const { return total_cost_s_; }

 private:
  struct RankState {
    std::deque<bool> slow;
    std::deque<double> ratio;
    bool straggler = false;
    int64_t since = 0;
    double cost_total = 0;
  };
  std::vector<std::string> hosts_;
  StragglerOptions o_;
  std::vector<RankState> ranks_;
  double total_cost_s_ = 0;
};

// "rank 2 on node7 computes 2.31x the median (1.904 s vs 0.824 s) in 4 of the last 5 steps; the job
// waits 1.080 s a step for it"
std::string describe(const Straggler& s, double median_s, const StragglerOptions& o);
nlohmann::json to_json(const Straggler& s);

}  // namespace ft::obs

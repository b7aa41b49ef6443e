#include "obs/straggler.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "util/median.h"

namespace ft::obs {

StragglerDetector::StragglerDetector(std::vector<std::string> hosts, StragglerOptions o)
    : hosts_(std::move(hosts)), o_(o) {}

StragglerReport StragglerDetector::observe(int64_t step, const std::vector<double>& compute_s) {
  StragglerReport out;
  const size_t n = compute_s.size();
  if (ranks_.size() != n) ranks_.assign(n, {});
  if (n < 2) return out;
  out.median_s = median(compute_s);
  const double m = out.median_s;
  for (size_t r = 0; r < n; ++r) {
    RankState& st = ranks_[r];
    const bool slow = compute_s[r] > o_.factor * m && compute_s[r] - m > o_.min_excess_s;
    st.slow.push_back(slow);
    st.ratio.push_back(m > 0 ? compute_s[r] / m : 1.0);
    while (static_cast<int>(st.slow.size()) > o_.window) st.slow.pop_front(), st.ratio.pop_front();
  }
  // Healthy ranks after this step's verdicts: the cost is measured against the slowest of them.
  std::vector<bool> straggler(n);
  for (size_t r = 0; r < n; ++r)
    straggler[r] = std::count(ranks_[r].slow.begin(), ranks_[r].slow.end(), true) >= o_.min_slow;
  double healthy_max = 0;
  for (size_t r = 0; r < n; ++r)
    if (!straggler[r]) healthy_max = std::max(healthy_max, compute_s[r]);
  for (size_t r = 0; r < n; ++r) {
    RankState& st = ranks_[r];
    Straggler s;
    s.rank = static_cast<int>(r);
    s.host = r < hosts_.size() ? hosts_[r] : "";
    s.compute_s = compute_s[r];
    std::vector<double> slow_ratios;
    for (size_t k = 0; k < st.slow.size(); ++k)
      if (st.slow[k]) slow_ratios.push_back(st.ratio[k]);
    s.slowdown = median(slow_ratios);
    if (straggler[r]) {
      if (!st.straggler) st.since = step, st.cost_total = 0;
      s.cost_s = std::max(0.0, compute_s[r] - healthy_max);
      st.cost_total += s.cost_s;
      s.cost_total_s = st.cost_total;
      s.since_step = st.since;
      if (!st.straggler) out.started.push_back(s);
      out.current.push_back(s);
      out.cost_s = std::max(out.cost_s, s.cost_s);
    } else if (st.straggler) {
      s.cost_total_s = st.cost_total;
      s.since_step = st.since;
      out.recovered.push_back(s);
    }
    st.straggler = straggler[r];
  }
  total_cost_s_ += out.cost_s;
  return out;
}

std::string describe(const Straggler& s, double median_s, const StragglerOptions& o) {
  return fmt::format(
      "rank {}{} computes {:.2f}x the median ({:.3f} s vs {:.3f} s) in at least {} of the last {} steps; the "
      "job waits {:.3f} s a step for it",
      s.rank, s.host.empty() ? "" : " on " + s.host, s.slowdown, s.compute_s, median_s, o.min_slow, o.window, s.cost_s);
}

nlohmann::json to_json(const Straggler& s) {
  return {{"rank", s.rank},
          {"host", s.host},
          {"slowdown", s.slowdown},
          {"compute_s", s.compute_s},
          {"cost_s", s.cost_s},
          {"cost_total_s", s.cost_total_s},
          {"since_step", s.since_step}};
}

}  // namespace ft::obs

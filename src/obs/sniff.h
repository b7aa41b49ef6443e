// Sniff tests, the judgement: every rank times a fixed GEMM and, on every mesh axis, a fixed
// exchange with each neighbour of its ring (train/sniffer.h measures); rank 0 gathers the times and
// names each rank whose GEMM, or whose best link on an axis, is slower than `margin` x the median of
// its peers — with its host and mesh coordinates — so that a slow device or link is found at a
// known moment, before it shows as a straggler (obs/straggler.h, which needs several slow steps).
//
//   std::vector<SniffRank> who = ...;                    // rank, host, (dp, tp, pp, cp) of every rank
//   SniffReport r = judge_sniff(step, who, samples, 1.5);
//   for (const SniffSlow& s : r.slow) log_warn("{}", describe(s, step));
//   r.slow_hosts();                                      // {"node7"}: what fault.exclude_slow_hosts reads
//
// A link is a pair of neighbours of an axis group (ranks i and i + 1 of the group, a ring); a rank's
// link time on the axis is the fastest round trip it made with either neighbour, so a slow NIC or
// cable names the rank behind it and not its healthy neighbours (each of which has one fast link).
// A group of two has one link: its two ranks are named together, and only against other groups.
//
// A finding must hold twice: when the first measurement names anyone, every rank measures again and
// each value is the faster of the two (`faster_of`) before the final judgement — a scheduler hiccup
// or a burst of other traffic slows one measurement, a slow device or link slows both.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace ft::obs {

// The mesh axes a sniff exchanges on.
enum class SniffAxis : uint8_t { kDp = 0, kTp, kPp, kCp, kCount };
inline constexpr size_t kNumSniffAxes = static_cast<size_t>(SniffAxis::kCount);
const char* sniff_axis_name(SniffAxis a);  // "dp", "tp", "pp", "cp"

// What one rank measured (seconds; < 0 = not measured: an axis of size 1).
struct SniffSample {
  double gemm_s = -1;                                // the fastest of a few timed GEMMs of a fixed shape
  std::array<double, kNumSniffAxes> link_s{};        // the fastest round trip with an axis neighbour
  std::array<double, kNumSniffAxes> all_reduce_s{};  // the fastest all-reduce of a fixed size over the axis
  SniffSample() { link_s.fill(-1), all_reduce_s.fill(-1); }
};

struct SniffRank {
  int rank = 0;
  std::string host;
  int dp = 0, tp = 0, pp = 0, cp = 0;
};

// A rank named by a sniff test.
struct SniffSlow {
  std::string check;  // "gemm", or "link_dp", "link_tp", "link_pp", "link_cp"
  SniffRank who;
  double seconds = 0;   // its time
  double median_s = 0;  // the median of its peers' times
  double ratio = 0;     // seconds / median_s
};

struct SniffReport {
  int64_t step = 0;  // the step after which it ran (the step a run starts from, at start-up)
  std::vector<SniffRank> ranks;
  std::vector<SniffSample> samples;  // per rank
  std::vector<SniffSlow> slow;
  std::vector<std::string> slow_hosts() const;  // the hosts of `slow`, each once, in rank order
};

// Judges the gathered samples. A time is compared with the median of the other ranks' times of the
// same check (at least one other needed), and named when it exceeds margin x that median and the
// median by at least min_excess_s (microsecond timings are noise, not findings).
SniffReport judge_sniff(int64_t step, std::vector<SniffRank> ranks, std::vector<SniffSample> samples, double margin,
                        double min_excess_s = 5e-4);

// Each value the faster of a's and b's (two measurements of one rank; < 0 stays "not measured").
SniffSample faster_of(const SniffSample& a, const SniffSample& b);

// "sniff after step 40: rank 2 on node7 (dp 2, tp 0, pp 0): GEMM 0.0312 s, 5.20x the median of its
// peers (0.0060 s)"
std::string describe(const SniffSlow& s, int64_t step);
// metrics.jsonl's "sniff" object (docs/formats.md): step, gemm_s, link_s, all_reduce_s, slow.
nlohmann::json to_json(const SniffReport& r);

}  // namespace ft::obs

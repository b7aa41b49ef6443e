// Weighted mixtures of prepared datasets (data.mixture): which source, and which of its
// sequences, every global sample comes from.
//
// A source is a prepared dataset, or one language's shards of one (prepare cuts shards per
// language). data.mixture names the sources and their weights:
//   "ru=0.5, en=0.5"                          languages of data.path
//   "data/web=0.3, data/manpages#ru=0.7"      datasets (directories or s3:// / gs:// URLs), #LANG optional
//
// The order (docs/formats.md, "Mixtures"), for global batch B and period W = 100·B:
// - quotas: source s gets n_s of every W samples (largest remainder of w_s/Σw · W);
// - a period's table: the n_s samples of each source at ideal times (k + ½)/n_s, merged in time
//   order, cut into B blocks of 100; block j fills batch position (column) j over the period's
//   100 steps, in an order permuted by (seed, j). The table repeats every W samples, so every
//   window of W consecutive samples — aligned or not — holds exactly n_s samples of source s;
//   each column holds a fixed m_{s,j} ≈ n_s/B of them, so the batches are mixed too;
// - source s's samples in column j read lane j of that source (its sequences
//   [j·S_s/B, (j+1)·S_s/B), as for one dataset, sequence_plan.h): the ℓ-th of them is
//   lane_begin + permute(ℓ mod L, L, key(seed, source name, j, ℓ div L)). Hence a pure function
//   of (seed, sample); dp rank r reads only the lanes of its positions (a contiguous shard range
//   of every source) for any dp that divides B; no sequence repeats within an epoch of its lane.
// - weights may change at a resume: a new segment starts at that sample with new quotas and
//   tables; every lane continues from the count its source consumed before (so nothing repeats
//   early). The segments are the loader state's `mixture` (saved in checkpoints).
//
//   auto sources = parse_mixture("ru=0.7, en=0.3", "data/manpages");
//   MixturePlan plan(names, plans, B, seed, {{0, {{"ru", 0.7}, {"en", 0.3}}}});
//   MixturePlan::Pick p = plan.pick(g);        // source index and sequence within that source
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ft {

class SequencePlan;

struct MixtureSource {
  std::string name;      // "ru", or the dataset directory's name (+ "_" + language)
  std::string path;      // dataset directory or URL
  std::string language;  // "" = the whole dataset
  double weight = 0;
};

// Throws ft::Error naming data.mixture and the bad entry.
std::vector<MixtureSource> parse_mixture(const std::string& spec, const std::string& default_path);

struct MixtureSegment {
  int64_t from_sample = 0;
  std::map<std::string, double> weights;
};
std::string mixture_history_to_json(const std::vector<MixtureSegment>& history);
std::vector<MixtureSegment> mixture_history_from_json(const std::string& text);  // throws on bad JSON

// Largest-remainder quotas of `total` for weights (ties to the lower index); they sum to total.
std::vector<int64_t> apportion(const std::vector<double>& weights, int64_t total);

class MixturePlan {
 public:
  static constexpr int64_t kRowsPerPeriod = 100;  // W = 100 · B

  // names[i] / lanes[i]: the sources read now (lanes gives each one's lane geometry; nullptr: only
  // counted, never picked — `data inspect`); names in the
  // history that are not read now still shape the tables of their segments. Throws ft::Error when
  // a segment's weights are all zero or negative.
  MixturePlan(std::vector<std::string> names, std::vector<const SequencePlan*> lanes, int64_t batch, uint64_t seed,
              std::vector<MixtureSegment> history);

  struct Pick {
    int source = 0;         // index into names
    uint64_t sequence = 0;  // sequence of that source (its SequencePlan numbering)
    int64_t lane_pass = 0;  // how many times this lane was read through before (its epoch)
  };
  Pick pick(int64_t global_sample) const;
  int64_t period() const { return period_; }
  // The quota (samples per period) of source i in the segment in force at global_sample.
  int64_t quota(int64_t global_sample, int i) const;
  // How many of the global samples [0, end) come from source i.
  int64_t samples_of(int i, int64_t end) const;
  const std::vector<MixtureSegment>& history() const { return history_; }

 private:
  struct Segment {
    int64_t from = 0;
    std::vector<int64_t> quota;  // per name
    std::vector<int32_t> table;  // W entries, row-major (row = step in period, column = position)
    std::vector<int32_t> crank;  // rank of the entry among its source's entries in its column
    std::vector<int64_t> m;      // per (name, column): entries in the column
    std::vector<int64_t> base;   // per (name, column): lane samples consumed before this segment
  };
  const Segment& segment_of(int64_t g) const;
  std::vector<std::string> names_;  // read now first, then history-only names
  std::vector<const SequencePlan*> lanes_;
  std::vector<uint64_t> name_keys_;
  int64_t batch_, period_;
  uint64_t seed_;
  std::vector<MixtureSegment> history_;
  std::vector<Segment> segments_;
};

}  // namespace ft

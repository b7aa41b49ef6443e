// Layout search: every dp × tp × pp × cp (× cp attention schedule × vp × micro-batch × ZeRO stage
// × recompute) that divides the job, keeps tensor parallelism inside a node and fits in memory,
// ranked by step time or by cost per token. cp > 1 (powers of two that split the sequence into
// 2·cp chunks) composes with pp, as the trainer runs it, and is tried with the ring and, where the
// heads split over the cp ranks, the all-to-all schedule (LayoutSpec::cp_attention fixes one).
//
//   SearchOptions o;  o.fixed.tp = 8;  o.rank_by = RankBy::kCost;  o.top = 5;
//   SearchResult s = search_layouts(job, o);    // s.best[0] is the winner
//   PlanResult p = best_layout_or_throw(job, o); // ft::Error with the nearest fitting setup
#pragma once

#include <optional>
#include <vector>

#include "plan/plan.h"

namespace ft::plan {

enum class RankBy { kTime, kCost };

struct SearchOptions {
  LayoutSpec fixed;  // fields the caller fixed
  RankBy rank_by = RankBy::kTime;
  size_t top = 10;
  bool vary_nodes = false;  // also try 1/2, 1/4, ... of the nodes (cheaper per token)
  bool tp_within_node = true;
  bool allow_uneven_stages = false;  // published runs: pp need not divide n_layers
  int64_t max_micro_batch = 64;
  int64_t max_vp = 8;
};

struct SearchResult {
  std::vector<PlanResult> best;        // fitting layouts, best first (at most `top`)
  std::optional<PlanResult> smallest;  // the least memory among all valid layouts
  int64_t evaluated = 0, fitting = 0;
};

SearchResult search_layouts(const Job& job, const SearchOptions& o);

// The best fitting layout; when none fits, throws ft::Error naming the smallest requirement
// and the nearest setup that fits (more nodes, or a GPU with more memory).
PlanResult best_layout_or_throw(const Job& job, const SearchOptions& o);

// Orders plans: by step time (tokens/s) or by cost per token (GPU-seconds when no price).
bool better(const PlanResult& a, const PlanResult& b, RankBy by, double price_per_gpu_hour);

}  // namespace ft::plan

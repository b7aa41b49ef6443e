#include "plan/search.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "plan/divisors.h"
#include "util/error.h"
#include "util/strings.h"

namespace ft::plan {

namespace {

template <typename T>
std::vector<T> choices(const std::optional<T>& fixed, std::vector<T> all) {
  if (fixed) return {*fixed};
  return all;
}

// Context-parallel degrees the search tries beside cp = 1: powers of two that split every sequence
// into 2·cp chunks (the zig-zag split). A cp group may span nodes (tp innermost, then cp: inside a
// node while tp · cp ranks fit one; beyond, the time model prices its link as the network). Long
// sequences are where it pays: the time model (plan/context_parallel.h) charges its traffic, so
// cp > 1 wins only when memory needs it (tp stops at a node) or its transfers hide better than
// tensor parallelism's.
std::vector<int64_t> cp_choices(const Job& job, int64_t tp) {
  std::vector<int64_t> out = {1};
  for (int64_t cp = 2; sat_mul(tp, cp) <= job.num_gpus() && 2 * cp <= job.seq_len; cp *= 2)
    if (job.num_gpus() % sat_mul(tp, cp) == 0 && job.seq_len % (2 * cp) == 0) out.push_back(cp);
  return out;
}

// The cp attention schedules a layout may run: the one fixed, else the ring and, where the heads
// split over the cp ranks as the trainer requires, the all-to-all (one schedule at cp = 1).
std::vector<CpAttention> cp_schedules(const Job& job, const SearchOptions& o, int64_t tp, int64_t cp) {
  if (o.fixed.cp_attention) return {*o.fixed.cp_attention};
  if (cp == 1) return {CpAttention::kRing};
  if (!all_to_all_heads_fit(job.model, tp, cp)) return {CpAttention::kRing};
  return {CpAttention::kRing, CpAttention::kAllToAll};
}

double cost_per_token(const PlanResult& r, double price) {
  const double gpu_seconds = r.time.total * static_cast<double>(r.gpus) / r.tokens_per_step;
  return price > 0 ? gpu_seconds * price / 3600.0 : gpu_seconds;
}

void search_one(const Job& job, const SearchOptions& o, SearchResult& out, std::vector<PlanResult>& fitting) {
  const ModelConfig& m = job.model;
  const LayoutSpec& f = o.fixed;
  const int64_t n = job.num_gpus();
  const int64_t gpn = std::min(job.gpus_per_node, n);
  std::vector<int64_t> tps;
  for (int64_t t : divisors(std::gcd(m.n_heads, m.ffn_dim))) {
    if (n % t != 0) continue;
    if (m.n_kv_heads % t != 0 && t % m.n_kv_heads != 0) continue;
    if (o.tp_within_node && t > gpn) continue;
    tps.push_back(t);
  }
  for (int64_t tp : choices(f.tp, tps))
    for (int64_t cp : choices(f.cp, cp_choices(job, tp))) {
      // Saturating: a --tp or --cp past the GPU count divides nothing (and overflows nothing).
      const int64_t tp_cp = sat_mul(tp, cp);
      if (n % tp_cp != 0) continue;
      std::vector<int64_t> pps;
      for (int64_t p = 1; p <= m.n_layers; ++p)
        if (n % sat_mul(tp_cp, p) == 0 && (o.allow_uneven_stages || m.n_layers % p == 0)) pps.push_back(p);
      for (int64_t pp : choices(f.pp, pps)) {
        if (n % sat_mul(tp_cp, pp) != 0) continue;
        const int64_t dp = n / (tp_cp * pp);
        if (f.dp && *f.dp != dp) continue;
        if (job.global_batch % dp != 0) continue;
        const int64_t per_replica = job.global_batch / dp;
        std::vector<int64_t> vps = {1};
        const int64_t stage_layers = layers_per_stage(m, pp);
        for (int64_t v = 2; pp > 1 && v <= std::min(o.max_vp, stage_layers); ++v)
          if (o.allow_uneven_stages || stage_layers % v == 0) vps.push_back(v);
        std::vector<int64_t> mbs;
        for (int64_t d : divisors(per_replica))
          if (d <= o.max_micro_batch) mbs.push_back(d);
        std::vector<int> zeros = dp * cp > 1 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{0};
        for (CpAttention sched : cp_schedules(job, o, tp, cp))
          for (int64_t vp : choices(f.vp, vps))
            for (int64_t mb : choices(f.micro_batch, mbs))
              for (int z : choices(f.zero, zeros))
                for (ActRecompute rc :
                     choices(f.recompute, {ActRecompute::kNone, ActRecompute::kSelective, ActRecompute::kFull})) {
                  Layout l;
                  l.dp = dp;
                  l.tp = tp;
                  l.pp = pp;
                  l.cp = cp;
                  l.cp_attention = sched;
                  l.vp = vp;
                  l.micro_batch = mb;
                  l.zero = z;
                  l.recompute = rc;
                  l.sequence_parallel = f.sequence_parallel.value_or(tp > 1);
                  l.precision = f.precision;
                  l.fp8_recipe = f.fp8_recipe;
                  l.ep = f.ep;
                  l.flash_attention = f.flash_attention;
                  l.sync_each_layer = f.sync_each_layer;
                  l.pp_scatter_gather = f.pp_scatter_gather;
                  l.wire = f.wire;
                  try {
                    validate_layout(job, l, o.allow_uneven_stages);
                  } catch (const Error&) {
                    continue;
                  }
                  PlanResult r = evaluate(job, l);
                  ++out.evaluated;
                  if (!out.smallest || r.memory.total() < out.smallest->memory.total()) out.smallest = r;
                  if (r.memory.fits()) {
                    ++out.fitting;
                    fitting.push_back(std::move(r));
                  }
                }
      }
    }
}

}  // namespace

bool better(const PlanResult& a, const PlanResult& b, RankBy by, double price_per_gpu_hour) {
  if (by == RankBy::kCost) {
    const double ca = cost_per_token(a, price_per_gpu_hour), cb = cost_per_token(b, price_per_gpu_hour);
    if (ca != cb) return ca < cb;
  }
  const double ta = a.time.total / a.tokens_per_step, tb = b.time.total / b.tokens_per_step;
  if (std::abs(ta - tb) > 1e-3 * std::min(ta, tb)) return ta < tb;
  // Equal time: the lower ZeRO stage (fewer collectives), then less memory.
  if (a.layout.zero != b.layout.zero) return a.layout.zero < b.layout.zero;
  return a.memory.total() < b.memory.total();
}

SearchResult search_layouts(const Job& job, const SearchOptions& o) {
  validate_job(job);
  job.gpu.peak(o.fixed.precision);
  SearchResult out;
  std::vector<PlanResult> fitting;
  search_one(job, o, out, fitting);
  if (o.vary_nodes) {
    for (int64_t nodes = job.nodes / 2; nodes >= 1; nodes /= 2) {
      Job smaller = job;
      smaller.nodes = nodes;
      smaller.gpus = 0;
      SearchOptions so = o;
      so.fixed.dp.reset();
      search_one(smaller, so, out, fitting);
      if (nodes == 1) break;
    }
  }
  std::stable_sort(fitting.begin(), fitting.end(), [&](const PlanResult& a, const PlanResult& b) {
    return better(a, b, o.rank_by, job.price_per_gpu_hour);
  });
  // Keep one ZeRO stage per layout unless the stages differ in time (they differ in memory only).
  std::vector<PlanResult> kept;
  for (auto& r : fitting) {
    bool dup = false;
    for (const auto& k : kept) {
      Layout a = r.layout, b = k.layout;
      a.zero = b.zero = 0;
      if (r.gpus == k.gpus && a.describe() == b.describe() &&
          std::abs(r.time.total - k.time.total) <= 1e-3 * k.time.total) {
        dup = true;
        break;
      }
    }
    if (!dup) kept.push_back(std::move(r));
    if (kept.size() >= o.top) break;
  }
  out.best = std::move(kept);
  return out;
}

PlanResult best_layout_or_throw(const Job& job, const SearchOptions& o) {
  SearchResult s = search_layouts(job, o);
  if (!s.best.empty()) return s.best.front();
  const double gib = 1073741824.0;
  if (!s.smallest) {
    // Name the specific problem of the given fields when there is one.
    validate_layout(job, o.fixed.with_defaults(job.num_gpus()), o.allow_uneven_stages);
    if (o.fixed.tp && o.tp_within_node && *o.fixed.tp > job.gpus_per_node)
      throw Error(fmt::format("tp = {} spans more than one node of {} GPUs", *o.fixed.tp, job.gpus_per_node),
                  fmt::format("keep tensor parallelism inside a node: tp <= {}", job.gpus_per_node));
    throw Error(fmt::format("no layout divides the job: {} GPUs, {} layers, {} heads, global batch {}", job.num_gpus(),
                            job.model.n_layers, job.model.n_heads, job.global_batch),
                "use a GPU count with small factors (a multiple of 8) and a global batch divisible by it");
  }
  // The nearest setup that fits: more nodes of this GPU, or a GPU with more memory.
  std::string hint;
  for (int64_t k = 2; k <= 1024 && hint.empty(); k *= 2) {
    Job bigger = job;
    bigger.gpus = job.num_gpus() * k;
    bigger.nodes = (bigger.gpus + job.gpus_per_node - 1) / job.gpus_per_node;
    if (bigger.global_batch % bigger.num_gpus() != 0)
      bigger.global_batch = (bigger.global_batch / bigger.num_gpus() + 1) * bigger.num_gpus();
    SearchOptions so = o;
    so.fixed.dp.reset();
    so.top = 1;
    SearchResult b = search_layouts(bigger, so);
    if (!b.best.empty())
      hint = fmt::format("it fits on {} GPUs ({} nodes), e.g. {} at {:.1f} GiB per GPU", bigger.num_gpus(),
                         bigger.nodes, b.best[0].layout.describe(), b.best[0].memory.total() / gib);
  }
  for (const auto& g : gpu_catalog()) {
    if (g.is_cpu || g.memory_bytes <= job.gpu.memory_bytes || g.memory_bytes < s.smallest->memory.total()) continue;
    hint += fmt::format("{}or on {} GPUs of type {} ({:.0f} GiB)", hint.empty() ? "" : "; ", job.num_gpus(), g.name,
                        g.memory_bytes / gib);
    break;
  }
  throw Error(fmt::format("the model ({:.2f} B parameters) does not fit on {} x {} ({:.1f} GiB) in any layout: "
                          "the smallest needs {:.1f} GiB per GPU ({})",
                          job.model.num_params() / 1e9, job.num_gpus(), job.gpu.name, job.gpu.memory_bytes / gib,
                          s.smallest->memory.total() / gib, s.smallest->layout.describe()),
              hint.empty() ? "use more GPUs or a GPU with more memory" : hint);
}

}  // namespace ft::plan

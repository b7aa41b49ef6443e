#include "plan/job.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <vector>

#include "plan/divisors.h"
#include "util/error.h"

namespace ft::plan {

namespace {

// The divisor of n closest to x (ties: the smaller one).
int64_t nearest_divisor(int64_t n, int64_t x) {
  int64_t best = 1;
  for (int64_t d : divisors(n))
    if (std::llabs(d - x) < std::llabs(best - x)) best = d;
  return best;
}

}  // namespace

int64_t Layout::world() const {
  return sat_mul(sat_mul(sat_mul(dp, tp), pp), cp);
}

int64_t Job::num_gpus() const {
  return gpus > 0 ? gpus : sat_mul(gpus_per_node, nodes);
}

std::string Layout::describe() const {
  std::string s = fmt::format("dp={} tp={} pp={}", dp, tp, pp);
  if (cp > 1) s += fmt::format(" cp={} ({})", cp, cp_attention_name(cp_attention));
  if (vp > 1) s += fmt::format(" vp={}", vp);
  if (ep > 1) s += fmt::format(" ep={}", ep);
  s += fmt::format(" mb={} zero={} recompute={}", micro_batch, zero, act_recompute_name(recompute));
  if (sequence_parallel && tp > 1) s += " sp";
  s += fmt::format(" {}", precision_label(precision));
  if (precision == Precision::kF8 && fp8_recipe != Fp8Recipe::kDelayed)
    s += fmt::format("-{}", fp8_recipe_name(fp8_recipe));
  if (!flash_attention) s += " no-flash";
  if (sync_each_layer) s += " sync-each-layer";
  return s;
}

const char* fp8_recipe_name(Fp8Recipe r) {
  switch (r) {
    case Fp8Recipe::kDelayed:
      return "delayed";
    case Fp8Recipe::kCurrent:
      return "current";
    case Fp8Recipe::kMXFP8:
      return "mxfp8";
    case Fp8Recipe::kNVFP4:
      return "nvfp4";
  }
  return "?";
}

Fp8Recipe fp8_recipe_from_name(const std::string& name) {
  for (Fp8Recipe r : {Fp8Recipe::kDelayed, Fp8Recipe::kCurrent, Fp8Recipe::kMXFP8, Fp8Recipe::kNVFP4})
    if (name == fp8_recipe_name(r)) return r;
  throw Error(fmt::format("unknown fp8 recipe '{}'", name), "use one of delayed, current, mxfp8, nvfp4");
}

double Layout::gemm_peak(const GpuSpec& g) const {
  if (precision == Precision::kF8 && fp8_recipe == Fp8Recipe::kNVFP4) return g.peak_fp4;
  return g.peak(precision);
}

Layout LayoutSpec::with_defaults(int64_t num_gpus) const {
  Layout l;
  l.tp = tp.value_or(1);
  l.pp = pp.value_or(1);
  l.cp = cp.value_or(1);
  l.cp_attention = cp_attention.value_or(CpAttention::kRing);
  l.vp = vp.value_or(1);
  l.ep = ep;
  const int64_t model_par = sat_mul(sat_mul(l.tp, l.pp), l.cp);
  l.dp = dp.value_or(model_par > 0 && num_gpus % model_par == 0 ? num_gpus / model_par : 1);
  l.micro_batch = micro_batch.value_or(1);
  l.zero = zero.value_or(0);
  l.recompute = recompute.value_or(ActRecompute::kNone);
  l.sequence_parallel = sequence_parallel.value_or(l.tp > 1);
  l.precision = precision;
  l.fp8_recipe = fp8_recipe;
  l.flash_attention = flash_attention;
  l.sync_each_layer = sync_each_layer;
  l.pp_scatter_gather = pp_scatter_gather;
  l.wire = wire;
  return l;
}

bool LayoutSpec::complete() const {
  return dp && tp && pp && micro_batch && zero && recompute;
}

int64_t micro_batches_per_step(const Job& job, const Layout& l) {
  const int64_t per_replica = job.global_batch / l.dp;
  return std::max<int64_t>(1, per_replica / l.micro_batch);
}

void validate_job(const Job& job) {
  auto positive = [](const char* what, double v, const char* hint) {
    if (!(v > 0)) throw Error(fmt::format("{} = {} must be positive", what, v), hint);
  };
  job.model.validate();
  positive("seq_len", static_cast<double>(job.seq_len), "pass --seq-len N");
  positive("global batch", static_cast<double>(job.global_batch), "pass --global-batch N (sequences per step)");
  if (job.global_batch > kMaxStepTokens / job.seq_len)
    throw Error(fmt::format("--global-batch {} sequences of --seq-len {} tokens is more than {} tokens per step",
                            job.global_batch, job.seq_len, kMaxStepTokens),
                "use a smaller --global-batch (or --seq-len)");
  if (job.gpus <= 0) {
    positive("--gpus-per-node", static_cast<double>(job.gpus_per_node), "pass --gpus-per-node N");
    positive("--nodes", static_cast<double>(job.nodes), "pass --nodes N");
  }
  if (job.num_gpus() > kMaxGpus) {
    throw Error(job.gpus > 0 ? fmt::format("--gpus {} is more than the planner's {} GPUs", job.gpus, kMaxGpus)
                             : fmt::format("--nodes {} x --gpus-per-node {} is more than the planner's {} GPUs",
                                           job.nodes, job.gpus_per_node, kMaxGpus),
                "plan a cluster of at most 16,777,216 GPUs (2^24)");
  }
  if (job.tokens < 0) throw Error(fmt::format("tokens = {} must not be negative", job.tokens));
  // Past these the totals (steps x step time x GPUs x price) would pass what a double holds: "$inf".
  if (job.tokens > kMaxTokens)
    throw Error(fmt::format("--tokens {:g} is more than the planner's {:g} tokens", job.tokens, kMaxTokens),
                "plan at most 1e30 tokens (a million times any published run)");
  // nan would read as "no price" and inf as "$inf": neither is a price.
  if (!(job.price_per_gpu_hour >= 0) || !std::isfinite(job.price_per_gpu_hour))
    throw Error(fmt::format("--price {} is not valid: expected a finite number of USD per GPU-hour >= 0",
                            job.price_per_gpu_hour),
                "for example --price 2.0 (0 or no --price: GPU-hours without a cost)");
  if (job.price_per_gpu_hour > kMaxPrice)
    throw Error(
        fmt::format("--price {:g} is more than the planner's {:g} USD per GPU-hour", job.price_per_gpu_hour, kMaxPrice),
        "the price is USD per GPU-hour, for example --price 2.0");
}

bool all_to_all_heads_fit(const ModelConfig& m, int64_t tp, int64_t cp) {
  const int64_t H = std::max<int64_t>(1, m.n_heads / tp), Hkv = std::max<int64_t>(1, m.n_kv_heads / tp);
  return H % cp == 0 && (Hkv % cp == 0 || cp % Hkv == 0);
}

void validate_layout(const Job& job, const Layout& l, bool allow_uneven_stages) {
  const ModelConfig& m = job.model;
  const int64_t n = job.num_gpus();
  for (auto [name, v] :
       {std::pair{"dp", l.dp}, {"tp", l.tp}, {"pp", l.pp}, {"cp", l.cp}, {"vp", l.vp}, {"micro-batch", l.micro_batch}})
    if (v <= 0) throw Error(fmt::format("{} = {} must be positive", name, v));
  for (auto [name, v] : {std::pair{"dp", l.dp}, {"tp", l.tp}, {"pp", l.pp}, {"cp", l.cp}})
    if (v > n)
      throw Error(fmt::format("{} = {} is more than the job's {} GPUs", name, v, n),
                  "dp × tp × pp × cp must equal the GPU count");
  if (l.zero < 0 || l.zero > 3)
    throw Error(fmt::format("zero = {} is not a ZeRO stage", l.zero), "use 0 (none), 1, 2 or 3");
  if (m.n_heads % l.tp != 0 || m.ffn_dim % l.tp != 0 || (m.n_kv_heads % l.tp != 0 && l.tp % m.n_kv_heads != 0)) {
    const int64_t g = std::gcd(m.n_heads, m.ffn_dim);
    throw Error(
        fmt::format("tp = {} does not divide the model: n_heads = {}, n_kv_heads = {}, ffn_dim = {}", l.tp, m.n_heads,
                    m.n_kv_heads, m.ffn_dim),
        fmt::format("nearest valid tp: {} (a divisor of gcd(n_heads, ffn_dim) = {})", nearest_divisor(g, l.tp), g));
  }
  const int64_t stages = sat_mul(l.pp, l.vp);
  if (stages > m.n_layers || (!allow_uneven_stages && m.n_layers % stages != 0)) {
    const int64_t v = nearest_divisor(m.n_layers, stages);
    throw Error(fmt::format("pp × vp = {} × {} does not divide n_layers = {}", l.pp, l.vp, m.n_layers),
                l.vp == 1 ? fmt::format("nearest valid pp: {}", v)
                          : fmt::format("nearest valid pp × vp: {} (e.g. pp={} vp={})", v, nearest_divisor(v, l.pp),
                                        v / nearest_divisor(v, l.pp)));
  }
  if (l.world() != n) {
    const int64_t model_par = sat_mul(sat_mul(l.tp, l.pp), l.cp);
    std::string hint =
        n % model_par == 0
            ? fmt::format("with tp={} pp={} cp={} use dp = {} / {} = {}", l.tp, l.pp, l.cp, n, model_par, n / model_par)
            : fmt::format("tp × pp × cp = {} does not divide {} GPUs; e.g. tp={} pp=1 dp={}", model_par, n,
                          nearest_divisor(n, l.tp), n / nearest_divisor(n, l.tp));
    const int64_t w = l.world();
    throw Error(fmt::format("dp × tp × pp × cp = {} × {} × {} × {} = {} but the job has {} GPUs", l.dp, l.tp, l.pp,
                            l.cp, w == std::numeric_limits<int64_t>::max() ? "more than 2^63" : std::to_string(w), n),
                hint);
  }
  if (l.vp > 1 && l.pp == 1)
    throw Error(fmt::format("vp = {} needs pipeline parallelism (pp = 1)", l.vp), "use vp = 1 or pp > 1");
  if (job.seq_len % l.cp != 0)
    throw Error(fmt::format("cp = {} does not divide seq_len = {}", l.cp, job.seq_len),
                fmt::format("nearest valid cp: {}", nearest_divisor(job.seq_len, l.cp)));
  if (l.cp > 1 && l.cp_attention == CpAttention::kAllToAll && !all_to_all_heads_fit(m, l.tp, l.cp))
    throw Error(fmt::format("cp = {} (all_to_all) scatters the attention heads over {} ranks, but a rank has {} query "
                            "heads and {} key/value heads (n_heads = {}, n_kv_heads = {} over tp = {})",
                            l.cp, l.cp, std::max<int64_t>(1, m.n_heads / l.tp),
                            std::max<int64_t>(1, m.n_kv_heads / l.tp), m.n_heads, m.n_kv_heads, l.tp),
                "use a cp that divides the query heads and divides (or is a multiple of) the key/value heads, or the "
                "ring schedule");
  if (job.global_batch % l.dp != 0) {
    const int64_t lo = job.global_batch / l.dp * l.dp;
    throw Error(fmt::format("global batch {} sequences does not split over dp = {} replicas", job.global_batch, l.dp),
                fmt::format("use a global batch of {} or {}, or a dp dividing {}", std::max(lo, l.dp), lo + l.dp,
                            job.global_batch));
  }
  const int64_t per_replica = job.global_batch / l.dp;
  if (l.micro_batch > per_replica)
    throw Error(fmt::format("micro-batch {} is more than the {} sequences per replica (global batch {} over dp = {})",
                            l.micro_batch, per_replica, job.global_batch, l.dp),
                fmt::format("nearest valid micro-batch: {}", nearest_divisor(per_replica, l.micro_batch)));
  if (per_replica % l.micro_batch != 0) {
    throw Error(fmt::format("global batch {} over dp = {} gives {} sequences per replica, which do not split "
                            "into micro-batches of {}",
                            job.global_batch, l.dp, per_replica, l.micro_batch),
                fmt::format("nearest valid micro-batch: {}; or a global batch of {}",
                            nearest_divisor(per_replica, l.micro_batch),
                            (per_replica / l.micro_batch + 1) * l.micro_batch * l.dp));
  }
  job.gpu.peak(l.precision);  // throws when the GPU lacks the precision
  if (l.ep < 1) throw Error(fmt::format("ep = {} must be at least 1", l.ep));
  if (l.ep > 1 && !job.moe.enabled())
    throw Error(fmt::format("ep = {} but the model has no experts", l.ep), "use ep = 1 for a dense model");
  if (job.moe.enabled()) {
    if (job.moe.experts % l.ep != 0)
      throw Error(fmt::format("ep = {} does not divide the {} experts", l.ep, job.moe.experts),
                  fmt::format("nearest valid ep: {}", nearest_divisor(job.moe.experts, l.ep)));
    if ((l.dp * l.cp) % l.ep != 0)
      throw Error(fmt::format("ep = {} does not divide dp × cp = {}", l.ep, l.dp * l.cp),
                  fmt::format("nearest valid ep: {}", nearest_divisor(l.dp * l.cp, l.ep)));
  }
  if (l.precision == Precision::kF8 && (l.fp8_recipe == Fp8Recipe::kMXFP8 || l.fp8_recipe == Fp8Recipe::kNVFP4) &&
      job.gpu.peak_fp4 <= 0)
    throw Error(fmt::format("{} needs block-scaled tensor cores, which GPU '{}' lacks", fp8_recipe_name(l.fp8_recipe),
                            job.gpu.name),
                "use a Blackwell GPU (b200, gb200) or the fp8 recipe delayed or current");
}

}  // namespace ft::plan

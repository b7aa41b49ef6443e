#include "plan/research/claims.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "plan/research/record.h"
#include "plan/search.h"
#include "util/error.h"

namespace ft::plan {

namespace {

using nlohmann::json;

constexpr double kTolerance = 0.10;  // claims within 10% of each other agree (rounding)

std::string si(double v, const char* unit = "") {
  const char* prefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  int i = 0;
  while (std::abs(v) >= 1000 && i < 6) {
    v /= 1000;
    ++i;
  }
  return fmt::format("{:.3g} {}{}", v, prefixes[i], unit);
}

// "14.4 k", "616", "1.84 M": a count with an SI prefix, for "{} tokens/s".
std::string count(double v) {
  std::string s = si(v);
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// A throughput claim re-expressed as tokens per second over the whole job.
struct Implied {
  std::string name;  // how it was derived, for the message
  std::vector<std::string> claims;
  double tokens_per_s = 0;
  std::string arithmetic;
};

}  // namespace

CheckResult check_claims(const json& c) {
  if (!c.is_object())
    throw Error("claims must be a JSON object in the published-run schema", "see configs/claims/case-study.json");
  CheckResult out;
  auto gpus = number_field(c, "num_gpus");
  if (!gpus || *gpus <= 0) throw Error("claims: num_gpus is required", "add \"num_gpus\": N");
  const std::string gpu_text = c.value("gpu_type", std::string());
  const std::string gpu_name = gpu_name_from_description(gpu_text);
  if (gpu_name.empty()) {
    std::string list;
    for (auto& g : gpu_names()) list += (list.empty() ? "" : ", ") + g;
    throw Error(fmt::format("claims: gpu_type '{}' is not in the catalog", gpu_text), "known types: " + list);
  }
  const double n = *gpus;

  // FLOPs per token: the model shape when given (the planner's convention), else 6 × params.
  std::optional<RecordJob> rj;
  double flops_per_token = 0;
  try {
    rj = job_from_record(c);
    flops_per_token = rj->job.model.train_flops_per_token(rj->job.seq_len);
    out.facts.push_back(fmt::format("model: {:.2f} B parameters, {} per token at seq_len {} (6N + 12·L·h·s)",
                                    rj->job.model.num_params() / 1e9, si(flops_per_token, "FLOP"), rj->job.seq_len));
  } catch (const Error&) {
    auto pb = number_field(c, "params_b");
    if (!pb) throw Error("claims: need the model shape (layers, hidden, vocab, seq_len) or params_b");
    flops_per_token = 6 * *pb * 1e9;
    out.facts.push_back(fmt::format("model: {:.2f} B parameters, {} per token (6N, attention not counted)", *pb,
                                    si(flops_per_token, "FLOP")));
  }
  GpuSpec gpu = rj ? rj->job.gpu : find_gpu(gpu_name);
  const Precision prec = rj ? rj->fixed.precision : Precision::kBF16;
  const double catalog_peak = gpu.peak(prec);
  const double peak = number_field(c, "peak_tflops_assumed").value_or(catalog_peak / 1e12) * 1e12;
  out.facts.push_back(fmt::format("hardware: {:.0f} x {}, dense {} peak {} per GPU, {:.0f} GiB each", n, gpu.name,
                                  precision_label(prec), si(peak, "FLOP/s"), gpu.memory_bytes / 1073741824.0));
  const double job_peak_tokens = n * peak / flops_per_token;
  out.facts.push_back(fmt::format("at 100% MFU the job could process at most {:.0f} x {} / {} = {} tokens/s", n,
                                  si(peak, "FLOP/s"), si(flops_per_token, "FLOP"), count(job_peak_tokens)));

  // Tokens trained: claimed, or epochs x dataset tokens.
  std::optional<double> tokens = number_field(c, "tokens_trained");
  auto epochs = number_field(c, "epochs"), dataset = number_field(c, "dataset_tokens");
  if (epochs && dataset) {
    const double t = *epochs * *dataset;
    if (tokens && std::abs(*tokens - t) > kTolerance * t)
      out.violations.push_back({"inconsistent",
                                {"tokens_trained", "epochs", "dataset_tokens"},
                                fmt::format("tokens_trained {} differs from epochs x dataset = {:g} x {} = {}",
                                            count(*tokens), *epochs, count(*dataset), count(t))});
    if (!tokens) tokens = t;
  }

  // Every throughput claim as tokens/s for the whole job.
  std::vector<Implied> implied;
  if (auto v = number_field(c, "tokens_per_s_total"))
    implied.push_back({"claimed tokens/s", {"tokens_per_s_total"}, *v, fmt::format("{} tokens/s", count(*v))});
  if (auto v = number_field(c, "tokens_per_s_per_gpu"))
    implied.push_back({"tokens/s per GPU x GPUs",
                       {"tokens_per_s_per_gpu", "num_gpus"},
                       *v * n,
                       fmt::format("{} x {:.0f} = {} tokens/s", count(*v), n, count(*v * n))});
  std::optional<double> batch_tokens = number_field(c, "global_batch_tokens");
  if (!batch_tokens) {
    auto seqs = number_field(c, "global_batch_seqs"), seq = number_field(c, "seq_len");
    if (seqs && seq) batch_tokens = *seqs * *seq;
  }
  if (auto s = number_field(c, "step_time_s"); s && batch_tokens && *s > 0)
    implied.push_back({"batch / step time",
                       {"global_batch_tokens", "step_time_s"},
                       *batch_tokens / *s,
                       fmt::format("{} tokens per step / {:g} s = {} tokens/s", count(*batch_tokens), *s,
                                   count(*batch_tokens / *s))});
  if (auto m = number_field(c, "mfu"))
    implied.push_back({"MFU x peak / FLOPs per token",
                       {"mfu"},
                       *m * job_peak_tokens,
                       fmt::format("{:.1f}% x {:.0f} x {} / {} = {} tokens/s", 100 * *m, n, si(peak, "FLOP/s"),
                                   si(flops_per_token, "FLOP"), count(*m * job_peak_tokens))});
  if (auto t = number_field(c, "tflops_per_gpu"))
    implied.push_back({"TFLOP/s per GPU / FLOPs per token",
                       {"tflops_per_gpu"},
                       *t * 1e12 * n / flops_per_token,
                       fmt::format("{:g} TFLOP/s x {:.0f} / {} = {} tokens/s (model FLOPs)", *t, n,
                                   si(flops_per_token, "FLOP"), count(*t * 1e12 * n / flops_per_token))});
  if (auto d = number_field(c, "wall_days"); d && tokens && *d > 0)
    implied.push_back({"tokens / wall-clock",
                       {"tokens_trained", "wall_days"},
                       *tokens / (*d * 86400),
                       fmt::format("{} tokens / ({:g} days x 86400 s) = {} tokens/s", count(*tokens), *d,
                                   count(*tokens / (*d * 86400)))});
  if (auto h = number_field(c, "gpu_hours"); h && tokens && *h > 0)
    implied.push_back({"tokens / GPU-hours",
                       {"tokens_trained", "gpu_hours"},
                       *tokens / (*h * 3600 / n),
                       fmt::format("{} tokens / ({} GPU-hours x 3600 / {:.0f} GPUs) = {} tokens/s", count(*tokens),
                                   count(*h), n, count(*tokens / (*h * 3600 / n)))});

  // Impossible: above the peak.
  for (const auto& im : implied) {
    const double mfu = im.tokens_per_s / job_peak_tokens;
    if (mfu > 1.0) {
      auto claims = im.claims;
      claims.push_back("num_gpus");
      out.violations.push_back(
          {"impossible", claims,
           fmt::format("{}: {} means {} per GPU x {} = {} per GPU, {:.0f}% of the {} peak ({:.0f}% MFU)", im.name,
                       im.arithmetic, count(im.tokens_per_s / n) + " tokens/s", si(flops_per_token, "FLOP"),
                       si(im.tokens_per_s / n * flops_per_token, "FLOP/s"), 100 * mfu, si(peak, "FLOP/s"), 100 * mfu)});
    }
  }
  if (auto m = number_field(c, "mfu"); m && *m > 1)
    out.violations.push_back({"impossible", {"mfu"}, fmt::format("MFU {:.0f}% is above 100%", 100 * *m)});

  // Inconsistent: pairs of throughput claims that disagree beyond rounding.
  for (size_t i = 0; i < implied.size(); ++i)
    for (size_t j = i + 1; j < implied.size(); ++j) {
      const double a = implied[i].tokens_per_s, b = implied[j].tokens_per_s;
      const double ratio = std::max(a, b) / std::min(a, b);
      if (ratio - 1 > kTolerance) {
        auto claims = implied[i].claims;
        claims.insert(claims.end(), implied[j].claims.begin(), implied[j].claims.end());
        out.violations.push_back({"inconsistent", claims,
                                  fmt::format("{} ({}) vs {} ({}): they differ by {:.2f}x", implied[i].name,
                                              implied[i].arithmetic, implied[j].name, implied[j].arithmetic, ratio)});
      }
    }
  // GPU-hours vs days, cost vs GPU-hours.
  auto days = number_field(c, "wall_days"), hours = number_field(c, "gpu_hours"), cost = number_field(c, "cost_usd");
  if (days && hours) {
    const double h = *days * 24 * n;
    if (std::abs(*hours - h) > kTolerance * std::max(h, *hours))
      out.violations.push_back({"inconsistent",
                                {"gpu_hours", "wall_days", "num_gpus"},
                                fmt::format("{:g} days x 24 x {:.0f} GPUs = {} GPU-hours, but {} are claimed", *days, n,
                                            count(h), count(*hours))});
  }
  if (auto price = number_field(c, "price_per_gpu_hour"); price && cost && hours) {
    const double usd = *hours * *price;
    if (std::abs(*cost - usd) > kTolerance * std::max(usd, *cost))
      out.violations.push_back({"inconsistent",
                                {"cost_usd", "gpu_hours", "price_per_gpu_hour"},
                                fmt::format("{} GPU-hours x ${:g} = ${}, but ${} is claimed", count(*hours), *price,
                                            count(usd), count(*cost))});
  }

  // Memory and the planner's best layout: impossible if nothing fits; optimistic if a claim
  // beats the best layout the planner finds by more than 30%.
  if (rj && batch_tokens) {
    Job job = rj->job;
    job.global_batch = static_cast<int64_t>(std::llround(*batch_tokens / job.seq_len));
    SearchOptions o;
    o.fixed.precision = rj->fixed.precision;
    o.top = 1;
    try {
      PlanResult best = best_layout_or_throw(job, o);
      out.facts.push_back(fmt::format("the planner's best layout: {} -> {} tokens/s ({:.1f}% MFU), {:.1f} GiB per GPU",
                                      best.layout.describe(), count(best.tokens_per_s), 100 * best.mfu,
                                      best.memory.total() / 1073741824.0));
      if (tokens) {
        std::string at_mfu;
        if (auto m = number_field(c, "mfu"); m && *m > 0)
          at_mfu = fmt::format("{:.1f} days at the claimed {:.0f}% MFU, ", *tokens / (*m * job_peak_tokens) / 86400,
                               100 * *m);
        out.facts.push_back(fmt::format(
            "{} tokens take {}{:.1f} days with the planner's best layout, {:.1f} days at "
            "100% MFU",
            count(*tokens), at_mfu, *tokens / best.tokens_per_s / 86400, *tokens / job_peak_tokens / 86400));
      }
      for (const auto& im : implied) {
        if (im.tokens_per_s > 1.3 * best.tokens_per_s && im.tokens_per_s <= job_peak_tokens)
          out.warnings.push_back(fmt::format("{}: {} is {:.1f}x the planner's best layout ({} tokens/s)", im.name,
                                             count(im.tokens_per_s) + " tokens/s", im.tokens_per_s / best.tokens_per_s,
                                             count(best.tokens_per_s)));
      }
    } catch (const Error& e) {
      out.violations.push_back({"impossible", {"num_gpus", "gpu_type"}, e.what()});
    }
  }
  out.possible = out.violations.empty();
  return out;
}

json to_json(const CheckResult& c) {
  json v = json::array();
  for (const auto& x : c.violations) v.push_back({{"kind", x.kind}, {"claims", x.claims}, {"message", x.message}});
  return {{"possible", c.possible}, {"violations", v}, {"warnings", c.warnings}, {"facts", c.facts}};
}

std::string format_check(const CheckResult& c) {
  std::string out;
  for (const auto& f : c.facts) out += "  " + f + "\n";
  out += c.possible ? "\nThe claims are possible together.\n"
                    : fmt::format("\nThe claims cannot all be true ({} problems):\n", c.violations.size());
  for (const auto& v : c.violations) out += fmt::format("  [{}] {}\n", v.kind, v.message);
  for (const auto& w : c.warnings) out += fmt::format("  [optimistic] {}\n", w);
  return out;
}

}  // namespace ft::plan

#include "plan/research/case_study.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "plan/research/claims.h"
#include "plan/research/record.h"
#include "util/error.h"
#include "util/strings.h"

namespace ft::plan {

namespace {

using nlohmann::json;

std::string or_dash(std::optional<double> v, const char* fmt_spec) {
  return v ? fmt::format(fmt::runtime(fmt_spec), *v) : std::string("-");
}

}  // namespace

Job case_job(const json& claims) {
  RecordJob rj = job_from_record(claims);
  Job job = rj.job;
  const std::string who = claims.value("id", std::string("the case"));
  if (job.tokens <= 0) {
    auto epochs = number_field(claims, "epochs"), dataset = number_field(claims, "dataset_tokens");
    if (epochs && dataset) job.tokens = *epochs * *dataset;
  }
  if (!(job.tokens > 0))
    throw Error(fmt::format("{}: no tokens to train", who),
                "add \"tokens_trained\", or \"epochs\" and \"dataset_tokens\" (or pass --tokens)");
  if (auto every = number_field(claims, "ckpt_every_steps")) {
    if (!(*every >= 1) || *every != std::floor(*every))
      throw Error(fmt::format("{}: ckpt_every_steps = {} must be a whole number of steps >= 1", who, *every),
                  "e.g. \"ckpt_every_steps\": 2000");
    job.resilience.ckpt_every_steps = static_cast<int64_t>(*every);
  }
  if (auto rec = number_field(claims, "recovery_s")) {
    if (!(*rec >= 0)) throw Error(fmt::format("{}: recovery_s = {} must be 0 or more", who, *rec), "seconds");
    job.resilience.restart_s = *rec;
  }
  return job;
}

std::string format_case(const json& claims, const Job& job, const PlanResult& r) {
  const CheckpointPlan& c = r.checkpoints;
  auto claimed_step = number_field(claims, "step_time_s");
  auto every = number_field(claims, "ckpt_every_steps");
  std::string s = fmt::format("\nthe case's claims beside the plan ({})\n", claims.value("id", std::string()));
  s += fmt::format("  {:<22} {:>16} {:>16}\n", "figure", "claimed", "planned");
  auto row = [&](const char* name, const std::string& claimed, const std::string& planned) {
    s += fmt::format("  {:<22} {:>16} {:>16}\n", name, claimed, planned);
  };
  row("tokens/s", or_dash(number_field(claims, "tokens_per_s_total"), "{:.4g}"), fmt::format("{:.4g}", r.tokens_per_s));
  row("step time (s)", or_dash(claimed_step, "{:.3g}"), fmt::format("{:.3g}", r.time.total));
  auto mfu = number_field(claims, "mfu");
  row("MFU (%)", mfu ? fmt::format("{:.1f}", 100 * *mfu) : "-", fmt::format("{:.1f}", 100 * r.mfu));
  row("tokens trained", or_dash(number_field(claims, "tokens_trained"), "{:.4g}"), fmt::format("{:.4g}", job.tokens));
  row("days", or_dash(number_field(claims, "wall_days"), "{:.3g}"), fmt::format("{:.1f}", r.wall_seconds / 86400));
  row("days with failures", "-", fmt::format("{:.1f}", c.at_chosen.wall_s / 86400));
  if (every) {
    row("checkpoint every", fmt::format("{:.0f} steps", *every), fmt::format("{:.0f} steps", c.interval_steps));
    row("  = minutes", claimed_step ? fmt::format("{:.1f}", *every * *claimed_step / 60) : "-",
        fmt::format("{:.1f}", c.interval_s / 60));
  }
  if (auto rec = number_field(claims, "recovery_s"))
    row("recovery (s)", fmt::format("{:.0f}", *rec), fmt::format("{:.0f} (assumed)", job.resilience.restart_s));
  if (every && claimed_step)
    s += fmt::format(
        "  the claimed {:.0f} steps x {:g} s = {:.1f} min between checkpoints holds only at the claimed step time; at "
        "the planned {:.3g} s it is {:.1f} min (Young/Daly's optimum: {:.1f} min)\n",
        *every, *claimed_step, *every * *claimed_step / 60, r.time.total, c.interval_s / 60, c.optimal_interval_s / 60);
  const CheckResult check = check_claims(claims);
  s += "\nclaim check (fluxtrain plan --check)\n" + format_check(check);
  return s;
}

json case_to_json(const json& claims, const Job& job, const PlanResult& r) {
  json j = to_json(r);
  j["job"] = to_json(job);
  j["job"]["restart_s"] = job.resilience.restart_s;
  j["job"]["failures_per_gpu_day"] = job.resilience.failures_per_gpu_day;
  j["job"]["storage_write_bw_per_node"] = job.resilience.storage_write_bw_per_node;
  j["case"] = {{"id", claims.value("id", std::string())}, {"claims", claims}, {"check", to_json(check_claims(claims))}};
  return j;
}

}  // namespace ft::plan

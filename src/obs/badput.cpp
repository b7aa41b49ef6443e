#include "obs/badput.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"

namespace ft::obs {
namespace {

constexpr int kStepPhase = -1;

const double kProcessStartedAt = unix_time_seconds();  // dynamic initialisation: before main()

std::optional<double> env_seconds(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  if (!end || *end != '\0' || !std::isfinite(d)) {
    log_warn("{}={}: not a number of seconds; ignored", name, v);
    return std::nullopt;
  }
  return d;
}

}  // namespace

double process_started_at() {
  return kProcessStartedAt;
}

const char* badput_kind_name(BadputKind k) {
  switch (k) {
    case BadputKind::kStartup:
      return "startup";
    case BadputKind::kRestart:
      return "restart";
    case BadputKind::kDataWait:
      return "data_wait";
    case BadputKind::kCheckpoint:
      return "checkpoint";
    case BadputKind::kEval:
      return "evaluation";
    case BadputKind::kStraggler:
      return "straggler";
    case BadputKind::kLostWork:
      return "lost_work";
    case BadputKind::kSkipped:
      return "skipped_update";
    case BadputKind::kOther:
      return "other";
    case BadputKind::kCount:
      break;
  }
  return "?";
}

double BadputTotals::bad_s() const {
  double s = 0;
  for (double v : seconds) s += v;
  return s;
}

double BadputTotals::goodput() const {
  const double wall = wall_s();
  return wall > 0 ? std::clamp(productive_s / wall, 0.0, 1.0) : 0.0;
}

nlohmann::json BadputTotals::to_json() const {
  nlohmann::json s = nlohmann::json::object();
  for (size_t k = 0; k < kNumBadputKinds; ++k) s[badput_kind_name(static_cast<BadputKind>(k))] = seconds[k];
  return {{"started_at", started_at}, {"at", at}, {"wall_s", wall_s()}, {"productive_s", productive_s}, {"seconds", s}};
}

BadputTotals BadputTotals::from_json(const nlohmann::json& j, const std::string& what) {
  auto number = [&](const nlohmann::json& o, const char* key) {
    if (!o.is_object() || !o.contains(key) || !o[key].is_number())
      throw Error(fmt::format("{}: badput field \"{}\" is missing or not a number", what, key),
                  "it is written by fluxtrain itself (metrics.jsonl \"badput\"); was the file edited?");
    return o[key].get<double>();
  };
  BadputTotals t;
  t.started_at = number(j, "started_at");
  t.at = number(j, "at");
  t.productive_s = number(j, "productive_s");
  const nlohmann::json s = j.is_object() && j.contains("seconds") ? j["seconds"] : nlohmann::json();
  for (size_t k = 0; k < kNumBadputKinds; ++k) t.seconds[k] = number(s, badput_kind_name(static_cast<BadputKind>(k)));
  return t;
}

Badput::Badput(BadputTotals before, BadputKind first) : t_(before), phase_(static_cast<int>(first)) {}

Badput Badput::from_env(double now) {
  if (const char* before = std::getenv("FLUXTRAIN_BADPUT_BEFORE"); before && *before) {
    try {
      return Badput(BadputTotals::from_json(nlohmann::json::parse(before), "FLUXTRAIN_BADPUT_BEFORE"),
                    BadputKind::kRestart);
    } catch (const std::exception& e) {
      log_warn("{}; badput restarts from this process's start", e.what());
    }
  }
  BadputTotals t;
  t.started_at = std::min(now, env_seconds("FLUXTRAIN_JOB_STARTED_AT").value_or(process_started_at()));
  t.at = t.started_at;
  return Badput(t, BadputKind::kStartup);
}

void Badput::charge(double now) {
  const double dt = std::max(0.0, now - t_.at);
  t_.at = std::max(t_.at, now);
  if (phase_ != kStepPhase) t_.seconds[static_cast<size_t>(phase_)] += dt;
  // A step's time is split by step_ends; a step that never ends (an exception) is charged there.
}

void Badput::enter(BadputKind phase, double now) {
  if (phase_ == kStepPhase) phase_ = static_cast<int>(BadputKind::kLostWork);  // a step abandoned mid-way
  charge(now);
  phase_ = static_cast<int>(phase);
}

void Badput::step_begins(double now) {
  enter(BadputKind::kOther, now);
  phase_ = kStepPhase;
}

void Badput::step_ends(double now, int64_t step, double data_wait_s, bool skipped) {
  const double dt = std::max(0.0, now - t_.at);
  t_.at = std::max(t_.at, now);
  const double wait = std::clamp(data_wait_s, 0.0, dt);
  t_.seconds[static_cast<size_t>(BadputKind::kDataWait)] += wait;
  if (skipped) {
    t_.seconds[static_cast<size_t>(BadputKind::kSkipped)] += dt - wait;
    step_productive_[step] = 0;
  } else {
    t_.productive_s += dt - wait;
    step_productive_[step] = dt - wait;
  }
  phase_ = static_cast<int>(BadputKind::kOther);
}

void Badput::straggled(int64_t step, double cost_s) {
  auto it = step_productive_.find(step);
  if (it == step_productive_.end() || !(cost_s > 0)) return;
  const double moved = std::min(cost_s, it->second);
  it->second -= moved;
  t_.productive_s -= moved;
  t_.seconds[static_cast<size_t>(BadputKind::kStraggler)] += moved;
}

void Badput::roll_back(int64_t to_step) {
  for (auto it = step_productive_.upper_bound(to_step); it != step_productive_.end();) {
    t_.productive_s -= it->second;
    t_.seconds[static_cast<size_t>(BadputKind::kLostWork)] += it->second;
    it = step_productive_.erase(it);
  }
}

double Badput::step_productive_s(int64_t step) const {
  auto it = step_productive_.find(step);
  return it == step_productive_.end() ? 0.0 : it->second;
}

BadputTotals Badput::totals(double now) {
  if (phase_ != kStepPhase) charge(now);
  return t_;
}

BadputTotals carry_over_restart(BadputTotals last, const std::vector<MetricsRecord>& records, int64_t resume_step) {
  double kept = 0;
  for (const MetricsRecord& r : records)
    if (r.step <= resume_step && std::isfinite(r.productive_s)) kept += r.productive_s;
  kept = std::min(kept, last.productive_s);
  last.seconds[static_cast<size_t>(BadputKind::kLostWork)] += last.productive_s - kept;
  last.productive_s = kept;
  return last;
}

std::string badput_summary(const BadputTotals& t) {
  std::vector<std::pair<double, const char*>> v;
  for (size_t k = 0; k < kNumBadputKinds; ++k)
    if (t.seconds[k] >= 0.05) v.emplace_back(t.seconds[k], badput_kind_name(static_cast<BadputKind>(k)));
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string out;
  for (const auto& [sec, name] : v) out += fmt::format("{}{} {:.1f} s", out.empty() ? "" : ", ", name, sec);
  return out.empty() ? "no badput" : "badput: " + out;
}

std::optional<BadputTotals> last_badput_row(const std::string& metrics_path) {
  std::ifstream in(metrics_path);
  std::optional<BadputTotals> out;
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"badput\"") == std::string::npos) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("badput")) continue;  // a line cut by a kill
    try {
      out = BadputTotals::from_json(j["badput"], metrics_path);
    } catch (const Error&) {
    }
  }
  return out;
}

}  // namespace ft::obs

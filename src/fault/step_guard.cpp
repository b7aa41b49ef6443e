#include "fault/step_guard.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "util/json_reader.h"  // defines: JsonReader (the field reader that names the JSON path)

namespace ft {
namespace {

// A spike must also be this far above the window's mean: a flat, converged loss has a tiny
// standard deviation, and a 1 % wobble must not count. The gradient norm swings far more in
// healthy training (the tiny config's reference run has a 2.9× jump at step 15, which clipping
// absorbs): a gradient-norm spike must be at least 5× the window's mean.
constexpr double kLossMinRelative = 0.10;
constexpr double kGradNormMinRelative = 4.0;

const char* kind(double v) {
  return std::isnan(v) ? "NaN" : "Inf";
}

struct MeanStd {
  double mean = 0, std = 0;
};

template <typename F>
MeanStd mean_std(const std::deque<F>& xs, double (*get)(const F&)) {
  MeanStd r;
  for (const F& x : xs) r.mean += get(x);
  r.mean /= static_cast<double>(xs.size());
  for (const F& x : xs) r.std += (get(x) - r.mean) * (get(x) - r.mean);
  r.std = std::sqrt(r.std / static_cast<double>(xs.size()));
  return r;
}

}  // namespace

const char* guard_action_name(GuardAction a) {
  switch (a) {
    case GuardAction::kUpdate:
      return "update";
    case GuardAction::kSkip:
      return "skip";
    case GuardAction::kRollback:
      return "rollback";
    case GuardAction::kStop:
      return "stop";
  }
  return "?";
}

GuardVerdict StepGuard::skip(int64_t step, GuardVerdict v) {
  if (consecutive_++ == 0) {
    first_skip_ = step;
    first_reason_ = v.message;
  }
  if (v.action == GuardAction::kSkip && consecutive_ >= cfg_.max_consecutive_skips) {
    v.action = GuardAction::kStop;
    v.message = consecutive_ == 1 ? first_reason_
                                  : fmt::format(
                                        "{}, and the {} step(s) after it were skipped too ({} in a row = "
                                        "fault.max_consecutive_skips)",
                                        first_reason_, consecutive_ - 1, consecutive_);
  }
  return v;
}

GuardVerdict StepGuard::judge(int64_t step, double loss, double grad_norm) {
  GuardVerdict v;
  if (!std::isfinite(loss) || !std::isfinite(grad_norm)) {
    bool bad_loss = !std::isfinite(loss);
    double x = bad_loss ? loss : grad_norm;
    v.reason = fmt::format("{}_{}", std::isnan(x) ? "nan" : "inf", bad_loss ? "loss" : "grad_norm");
    v.message = fmt::format("{} is {} at step {}", bad_loss ? "loss" : "gradient norm", kind(x), step);
    v.action = cfg_.nan_policy == NanPolicy::kStop ? GuardAction::kStop : GuardAction::kSkip;
    return skip(step, v);
  }
  if (cfg_.spike_zscore > 0 && static_cast<int64_t>(history_.size()) >= cfg_.spike_min_history) {
    MeanStd l = mean_std<Point>(history_, [](const Point& p) { return p.loss; });
    MeanStd g = mean_std<Point>(history_, [](const Point& p) { return p.grad_norm; });
    auto z = [](double x, MeanStd m) { return m.std > 0 ? (x - m.mean) / m.std : (x > m.mean ? INFINITY : 0.0); };
    v.loss_z = z(loss, l);
    v.grad_norm_z = z(grad_norm, g);
    bool loss_spike = v.loss_z > cfg_.spike_zscore && loss > l.mean * (1 + kLossMinRelative);
    bool gn_spike = v.grad_norm_z > cfg_.spike_zscore && grad_norm > g.mean * (1 + kGradNormMinRelative);
    if (loss_spike || gn_spike) {
      while (!spikes_.empty() && spikes_.front() <= step - cfg_.spike_window) spikes_.pop_front();
      spikes_.push_back(step);
      v.spikes_in_window = static_cast<int64_t>(spikes_.size());
      v.reason = loss_spike ? "loss_spike" : "grad_norm_spike";
      v.message = fmt::format(
          "{} at step {}: loss {:.4g} (z {:.1f}), gradient norm {:.4g} (z {:.1f}) against the "
          "last {} steps; {} spike(s) in the window",
          loss_spike ? "loss spike" : "gradient-norm spike", step, loss, v.loss_z, grad_norm, v.grad_norm_z,
          history_.size(), v.spikes_in_window);
      bool rollback = cfg_.spike_rollback_after > 0 && v.spikes_in_window >= cfg_.spike_rollback_after;
      v.action = rollback ? GuardAction::kRollback : GuardAction::kSkip;
      return skip(step, v);
    }
  }
  consecutive_ = 0;
  history_.push_back({step, loss, grad_norm});
  while (static_cast<int64_t>(history_.size()) > cfg_.spike_window) history_.pop_front();
  return v;
}

void StepGuard::rolled_back(int64_t to_step) {
  while (!history_.empty() && history_.back().step > to_step) history_.pop_back();
  spikes_.clear();
  consecutive_ = 0;
}

}  // namespace ft

namespace ft {

nlohmann::json StepGuard::to_json() const {
  nlohmann::json history = nlohmann::json::array(), spikes = nlohmann::json::array();
  for (const Point& p : history_) history.push_back({p.step, p.loss, p.grad_norm});
  for (int64_t s : spikes_) spikes.push_back(s);
  return {{"history", std::move(history)},
          {"spikes", std::move(spikes)},
          {"consecutive_skips", consecutive_},
          {"first_skip", first_skip_},
          {"first_reason", first_reason_}};
}

void StepGuard::restore(const nlohmann::json& j, const std::string& where) {
  const JsonReader r(where, "the checkpoint is damaged; resume from an older one");
  const std::string path = ".step_guard";
  const nlohmann::json& h = r.at(j, "history", path);
  if (!h.is_array()) r.fail(path + ".history", "must be an array of [step, loss, grad_norm]");
  std::deque<Point> history;
  for (size_t i = 0; i < h.size(); ++i) {
    const nlohmann::json& p = h[i];
    const bool ok = p.is_array() && p.size() == 3 && p[0].is_number_integer() && p[1].is_number() && p[2].is_number();
    if (!ok) r.fail(fmt::format("{}.history[{}]", path, i), "must be [step, loss, grad_norm]");
    history.push_back({p[0].get<int64_t>(), p[1].get<double>(), p[2].get<double>()});
  }
  const nlohmann::json& sp = r.at(j, "spikes", path);
  if (!sp.is_array()) r.fail(path + ".spikes", "must be an array of steps");
  std::deque<int64_t> spikes;
  for (size_t i = 0; i < sp.size(); ++i) {
    if (!sp[i].is_number_integer()) r.fail(fmt::format("{}.spikes[{}]", path, i), "must be a step number");
    spikes.push_back(sp[i].get<int64_t>());
  }
  const int64_t consecutive = r.i64(j, "consecutive_skips", path);
  const int64_t first_skip = r.i64(j, "first_skip", path);
  first_reason_ = r.str(j, "first_reason", path);
  // A resumed run may have a shorter fault.spike_window: the oldest points fall out of it.
  while (static_cast<int64_t>(history.size()) > cfg_.spike_window) history.pop_front();
  history_ = std::move(history);
  spikes_ = std::move(spikes);
  consecutive_ = consecutive;
  first_skip_ = first_skip;
}

}  // namespace ft

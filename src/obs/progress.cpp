#include "obs/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>

#include "util/log.h"
#include "util/strings.h"

namespace ft::obs {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string human_rate(double v) {
  if (!std::isfinite(v)) return "?";
  if (v >= 1e9) return fmt::format("{:.2f}G", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.2f}M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.1f}k", v / 1e3);
  return fmt::format("{:.0f}", v);
}

}  // namespace

ProgressLine::ProgressLine(int64_t total_steps, int64_t log_interval, Mode mode)
    : total_(total_steps), interval_(log_interval > 0 ? log_interval : 1) {
  live_ = mode == Mode::kLive || (mode == Mode::kAuto && ::isatty(STDERR_FILENO));
}

ProgressLine::~ProgressLine() {
  finish();
}

std::string ProgressLine::format(const ProgressStats& s, int64_t total, double eta_s) {
  std::string out = total > 0 ? fmt::format("step {}/{}", s.step, total) : fmt::format("step {}", s.step);
  out += fmt::format(" | loss {:.4f}", s.loss);
  if (std::isfinite(s.lr)) out += fmt::format(" | lr {:.2e}", s.lr);
  if (std::isfinite(s.grad_norm)) out += fmt::format(" | grad norm {:.3f}", s.grad_norm);
  out += fmt::format(" | {} tok/s", human_rate(s.tokens_per_s));
  if (std::isfinite(s.mfu)) out += fmt::format(" | MFU {:.1f}%", 100 * s.mfu);
  if (std::isfinite(s.step_s)) out += fmt::format(" | {:.3g} s/step", s.step_s);
  if (eta_s >= 0) out += " | ETA " + human_duration(eta_s);
  return out;
}

void ProgressLine::update(const ProgressStats& s) {
  if (std::isfinite(s.step_s) && s.step_s > 0)
    ema_step_s_ = ema_step_s_ < 0 ? s.step_s : 0.9 * ema_step_s_ + 0.1 * s.step_s;
  eta_s_ =
      (total_ > 0 && ema_step_s_ >= 0) ? static_cast<double>(std::max<int64_t>(total_ - s.step, 0)) * ema_step_s_ : -1;
  bool last = total_ > 0 && s.step >= total_;
  if (live_) {
    double t = now_s();
    if (!last && last_draw_ >= 0 && t - last_draw_ < 0.1) return;  // at most 10 redraws a second
    last_draw_ = t;
    set_status_line(format(s, total_, eta_s_));
  } else if (s.step % interval_ == 0 || last || s.step == 1) {
    log_info("{}", format(s, total_, eta_s_));
  }
}

void ProgressLine::finish() {
  if (finished_) return;
  finished_ = true;
  if (live_) end_status_line();
}

}  // namespace ft::obs

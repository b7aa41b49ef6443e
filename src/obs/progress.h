// ProgressLine: what a person watching the run sees. On a terminal, one live line redrawn in
// place (log lines scroll above it); otherwise an ordinary log line every log_interval steps.
//
//   obs::ProgressLine progress(cfg.train.steps, cfg.train.log_interval);   // on rank 0
//   for (...) progress.update({.step = s, .loss = loss, .tokens_per_s = tps, .mfu = mfu, .step_s = dt});
//   progress.finish();
//
//   step 120/1000 | loss 3.2145 | lr 3.00e-04 | grad norm 0.812 | 12.3k tok/s | MFU 41.2% | 0.21 s/step | ETA 3m05s
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

namespace ft::obs {

struct ProgressStats {
  int64_t step = 0;  // steps completed (1-based)
  double loss = NAN;
  double tokens_per_s = NAN;
  double mfu = NAN;        // 0..1; NaN = unknown (not shown)
  double step_s = NAN;     // wall time of this step
  double lr = NAN;         // shown when given
  double grad_norm = NAN;  // shown when given
};

class ProgressLine {
 public:
  enum class Mode { kAuto, kLive, kPlain };  // kAuto: live when stderr is a terminal
  ProgressLine(int64_t total_steps, int64_t log_interval, Mode mode = Mode::kAuto);
  ~ProgressLine();

  void update(const ProgressStats& s);
  void finish();  // leaves the last live line on screen
  bool live() const { return live_; }
  double eta_seconds() const { return eta_s_; }

  // "step 120/1000 | loss 3.2145 | ..."; eta_s < 0 = unknown.
  static std::string format(const ProgressStats& s, int64_t total_steps, double eta_s);

 private:
  int64_t total_, interval_;
  bool live_ = false, finished_ = false;
  double ema_step_s_ = -1, eta_s_ = -1, last_draw_ = -1;
};

}  // namespace ft::obs

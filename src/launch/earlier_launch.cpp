#include "launch/earlier_launch.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "ckpt/probe.h"
#include "obs/metrics_reader.h"
#include "util/error.h"

namespace ft {
namespace {

// The step of the checkpoint a resume names: the newest valid one for "auto", else the
// step_NNNNNNNN the path ends in (-1: none).
int64_t resume_step_of(const Config& cfg) {
  if (cfg.ckpt.resume == "auto") {
    CheckpointProbe p = probe_checkpoints(cfg.ckpt, cfg.train.run_dir, cfg.data.endpoint);
    return p.newest ? p.newest->step : -1;
  }
  static const std::regex step_dir(R"(step_([0-9]+)/*$)");
  std::smatch m;
  return std::regex_search(cfg.ckpt.resume, m, step_dir) ? std::stoll(m[1].str()) : -1;
}

}  // namespace

EarlierLaunch read_earlier_launch(const std::string& run_dir, const Config& cfg) {
  EarlierLaunch e;
  std::ifstream events(run_dir + "/supervisor.jsonl");
  for (std::string line; std::getline(events, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);  // a line cut by a kill is skipped
    if (j.is_discarded() || !j.is_object()) continue;
    if (j.value("event", "") == "start") ++e.attempts;
    e.last_event_at = j.value("time", e.last_event_at);
  }
  const std::string metrics = run_dir + "/metrics.jsonl";
  if (!std::filesystem::exists(metrics)) return e;
  try {
    e.resume_step = resume_step_of(cfg);
    auto last = obs::last_badput_row(metrics);
    if (last && e.resume_step >= 0)
      e.badput = obs::carry_over_restart(*last, obs::read_metrics_jsonl(metrics), e.resume_step);
  } catch (const Error&) {  // a damaged metrics file: badput starts over with this launch
    e.badput.reset();
  }
  return e;
}

}  // namespace ft

// What a resumed `fluxtrain launch` (`--resume auto` or a checkpoint path) takes over from the
// launches before it in the same run directory, so that the job reads as one across them:
//
//   EarlierLaunch e = read_earlier_launch(run_dir, cfg);
//   attempts_ = e.attempts;                 // the next attempt is e.attempts + 1 (logs, heartbeats,
//                                           // samples/ records stay distinct)
//   if (e.badput) job_started_ = e.badput->started_at;   // badput counts from the first launch
//
// The badput is the totals of the last metrics.jsonl row with the productive time of its steps
// after the checkpoint the launch resumes from moved to lost work (obs::carry_over_restart); the
// time from that row to the new first step is then "restart" time (a supervisor killed and started
// again, a drained job relaunched). Nothing when the directory holds no earlier launch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "config/config.h"
#include "obs/badput.h"

namespace ft {

struct EarlierLaunch {
  int attempts = 0;          // "start" events in supervisor.jsonl
  int64_t resume_step = -1;  // the checkpoint step the launch resumes from (-1: unknown)
  double last_event_at = 0;  // Unix seconds of the last supervisor event (0: none)
  std::optional<obs::BadputTotals> badput;
};

// cfg.ckpt.resume must be set ("auto" or a path); unreadable files give an empty record.
EarlierLaunch read_earlier_launch(const std::string& run_dir, const Config& cfg);

}  // namespace ft

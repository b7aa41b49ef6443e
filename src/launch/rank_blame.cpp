#include "launch/rank_blame.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "launch/process.h"  // defines: process_state
#include "util/shell_quote.h"

namespace ft {
namespace {

ProcState from_letter(char c) {
  if (c == 0 || c == 'Z' || c == 'X' || c == 'x') return ProcState::kGone;
  if (c == 'T') return ProcState::kStopped;
  return ProcState::kRunning;  // R, S, D, t (a debugger attached), I, ...
}

// "PID LETTER" per line for each pid on `host` ("PID" alone: no such process).
std::string remote_command(const std::vector<int64_t>& pids, const std::string& host, double timeout_s) {
  std::string list;
  for (int64_t p : pids) list += fmt::format(" {}", p);
  // The state letter follows the ")" that ends the command name in /proc/PID/stat.
  const std::string script = fmt::format(
      "for p in{}; do printf '%s ' $p; sed -n 's/.*) \\(.\\).*/\\1/p' /proc/$p/stat 2>/dev/null; echo; done", list);
  return fmt::format("timeout -s KILL {:.0f} ssh -o BatchMode=yes -o ConnectTimeout={:.0f} {} {} 2>/dev/null",
                     timeout_s, std::max(1.0, timeout_s - 1), shell_quote(host), shell_quote(script));
}

}  // namespace

const char* proc_state_name(ProcState s) {
  switch (s) {
    case ProcState::kRunning:
      return "running";
    case ProcState::kStopped:
      return "stopped";
    case ProcState::kGone:
      return "gone";
    case ProcState::kUnknown:
      break;
  }
  return "unknown";
}

void probe_processes(std::vector<RankSeen>& ranks, double timeout_s) {
  std::map<std::string, std::vector<size_t>> remote;  // host -> indices
  for (size_t i = 0; i < ranks.size(); ++i) {
    RankSeen& r = ranks[i];
    if (r.pid <= 0) continue;
    if (r.local)
      r.state = from_letter(process_state(static_cast<pid_t>(r.pid)));
    else
      remote[r.host].push_back(i);
  }
  std::vector<std::thread> workers;
  for (const auto& kv : remote) {
    workers.emplace_back([&ranks, &kv, timeout_s] {
      const std::string& host = kv.first;
      const std::vector<size_t>& idx = kv.second;
      std::vector<int64_t> pids;
      for (size_t i : idx) pids.push_back(ranks[i].pid);
      std::string out;
      int code = 127;
      if (std::FILE* p = ::popen(remote_command(pids, host, timeout_s).c_str(), "r")) {
        char buf[1024];
        size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
        const int st = ::pclose(p);
        code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      if (code != 0) return;  // the host did not answer: unknown
      std::map<int64_t, char> letter;
      std::istringstream in(out);
      for (std::string line; std::getline(in, line);) {
        std::istringstream l(line);
        int64_t pid = 0;
        std::string s;
        if (l >> pid) letter[pid] = (l >> s) && !s.empty() ? s[0] : 0;
      }
      for (size_t i : idx)
        if (auto it = letter.find(ranks[i].pid); it != letter.end()) ranks[i].state = from_letter(it->second);
    });
  }
  for (std::thread& t : workers) t.join();
}

std::vector<size_t> silent_casualties(const std::vector<RankSeen>& ranks) {
  std::vector<size_t> silent;
  size_t reported = 0;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const std::string& ph = ranks[i].phase;
    if (ph == "failed" || ph == "gpu_fault") {
      ++reported;
      continue;
    }
    if (ph.empty() || ph == "done" || ph == "stopped") continue;
    if (ranks[i].state == ProcState::kGone || ranks[i].state == ProcState::kStopped) silent.push_back(i);
  }
  if (reported == 0) silent.clear();
  return silent;
}

std::string describe(const RankSeen& r, double detected_at) {
  std::string where = r.phase.empty()      ? std::string("no heartbeat")
                      : r.phase == "train" ? fmt::format("phase train after step {} (in step {})", r.step, r.step + 1)
                                           : fmt::format("phase {} at step {}", r.phase, r.step);
  if (r.beat_at > 0)
    where += fmt::format(", its last heartbeat {:.1f} s before the failure was detected", detected_at - r.beat_at);
  return fmt::format("rank {} on {} (dp {}, tp {}, pp {}, cp {}): {}; process {}", r.rank,
                     r.host.empty() ? "an unknown host" : r.host, r.coord.dp, r.coord.tp, r.coord.pp, r.coord.cp, where,
                     proc_state_name(r.state));
}

nlohmann::json to_json(const RankSeen& r, double detected_at) {
  nlohmann::json j = {{"rank", r.rank},   {"host", r.host},   {"dp", r.coord.dp},
                      {"tp", r.coord.tp}, {"pp", r.coord.pp}, {"cp", r.coord.cp},
                      {"phase", r.phase}, {"step", r.step},   {"process", proc_state_name(r.state)}};
  if (r.beat_at > 0) j["beat_age_s"] = detected_at - r.beat_at;
  return j;
}

}  // namespace ft

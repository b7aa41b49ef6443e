#include "util/log.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>

namespace ft {
namespace {

struct LogState {
  int rank = 0;
  int world = 1;
  LogLevel level = LogLevel::kInfo;
  bool all_ranks = std::getenv("FT_LOG_ALL_RANKS") != nullptr;
  std::mutex mu;
  std::string status;  // live status line, "" = none
};

LogState& state() {
  static LogState s;
  return s;
}

}  // namespace

void set_log_rank(int rank, int world_size) {
  state().rank = rank;
  state().world = world_size;
}

void set_log_level(LogLevel level) {
  state().level = level;
}

void log_line(LogLevel level, const std::string& msg) {
  LogState& s = state();
  if (level < s.level) return;
  if (level <= LogLevel::kInfo && s.rank != 0 && !s.all_ranks) return;
  auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&now, &tm);
  char ts[32];
  std::strftime(ts, sizeof ts, "%H:%M:%S", &tm);
  const char* tag = level == LogLevel::kWarn ? "warning: " : level == LogLevel::kError ? "error: " : "";
  std::string prefix = s.world > 1 ? fmt::format("[{} rank {}] ", ts, s.rank) : fmt::format("[{}] ", ts);
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.status.empty()) std::fputs("\r\x1b[K", stderr);
  std::fprintf(stderr, "%s%s%s\n", prefix.c_str(), tag, msg.c_str());
  if (!s.status.empty()) std::fputs(s.status.c_str(), stderr);
  std::fflush(stderr);
}

void set_status_line(const std::string& line) {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.status = line;
  std::fprintf(stderr, "\r\x1b[K%s", line.c_str());
  std::fflush(stderr);
}

void end_status_line() {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.status.empty()) return;
  s.status.clear();
  std::fputs("\n", stderr);
  std::fflush(stderr);
}

}  // namespace ft

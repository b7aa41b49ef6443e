// Logging: plain timestamped lines on stderr. In multi-rank runs only rank 0 prints info
// lines unless FT_LOG_ALL_RANKS=1; warnings and errors print on every rank with a prefix.
//
//   ft::log_info("loaded {} shards", n);
//   ft::log_warn("checkpoint {} is incomplete, skipping", dir);
#pragma once

#include <fmt/format.h>

#include <string>

namespace ft {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

// Called once by the launcher after the world is known; prefixes lines with "[rank r]".
void set_log_rank(int rank, int world_size);
void set_log_level(LogLevel level);
void log_line(LogLevel level, const std::string& msg);

// A live status line at the bottom of a terminal (obs::ProgressLine draws it): log lines are
// printed above it and it is redrawn under them. Only for a stderr that is a terminal.
// end_status_line() leaves the last one on screen as an ordinary line.
void set_status_line(const std::string& line);
void end_status_line();

template <typename... Args>
void log_debug(fmt::format_string<Args...> f, Args&&... args) {
  log_line(LogLevel::kDebug, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void log_info(fmt::format_string<Args...> f, Args&&... args) {
  log_line(LogLevel::kInfo, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void log_warn(fmt::format_string<Args...> f, Args&&... args) {
  log_line(LogLevel::kWarn, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void log_error(fmt::format_string<Args...> f, Args&&... args) {
  log_line(LogLevel::kError, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace ft

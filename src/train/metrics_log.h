// MetricsLog: <run_dir>/metrics.jsonl, one JSON object per line, flushed per line — the
// canonical record of a run (docs/formats.md, "metrics.jsonl"). Written by rank 0 only.
//
//   MetricsLog log(run_dir, /*enabled=*/rank == 0, /*append=*/resuming);
//   log.write({{"step", 1}, {"loss", 5.2}});
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace ft {

class MetricsLog {
 public:
  MetricsLog() = default;
  MetricsLog(const std::string& run_dir, bool enabled, bool append);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void write(const nlohmann::json& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
};

}  // namespace ft

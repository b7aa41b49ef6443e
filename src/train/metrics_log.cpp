#include "train/metrics_log.h"

#include <cerrno>
#include <cstring>

#include "util/error.h"

namespace ft {

MetricsLog::MetricsLog(const std::string& run_dir, bool enabled, bool append) : path_(run_dir + "/metrics.jsonl") {
  if (!enabled) return;
  f_ = std::fopen(path_.c_str(), append ? "a" : "w");
  if (!f_) {
    throw Error(fmt::format("cannot open {}: {}", path_, std::strerror(errno)),
                "check that train.run_dir (--run-dir) is writable");
  }
}

MetricsLog::~MetricsLog() {
  if (f_) std::fclose(f_);
}

void MetricsLog::write(const nlohmann::json& record) {
  if (!f_) return;
  std::string line = record.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), f_) != line.size() || std::fflush(f_) != 0) {
    throw Error(fmt::format("writing {}: {}", path_, std::strerror(errno)), errno == ENOSPC ? "the disk is full" : "");
  }
}

}  // namespace ft

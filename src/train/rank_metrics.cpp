#include "train/rank_metrics.h"

namespace ft {

nlohmann::json gather_per_rank(Communicator& group, const std::vector<std::pair<std::string, double>>& values) {
  const size_t n = values.size(), ranks = static_cast<size_t>(group.size());
  std::vector<double> mine(n), all(n * ranks);
  for (size_t i = 0; i < n; ++i) mine[i] = values[i].second;
  group.all_gather(all.data(), mine.data(), static_cast<int64_t>(n * sizeof(double)));
  nlohmann::json j = nlohmann::json::object();
  for (size_t i = 0; i < n; ++i) {
    nlohmann::json column = nlohmann::json::array();
    for (size_t r = 0; r < ranks; ++r) {
      double v = all[r * n + i];
      if (v == static_cast<double>(static_cast<int64_t>(v)))
        column.push_back(static_cast<int64_t>(v));
      else
        column.push_back(v);
    }
    j[values[i].first] = column;
  }
  return j;
}

std::vector<std::string> gather_strings(Communicator& group, const std::string& mine) {
  constexpr size_t kLen = 256;
  const size_t ranks = static_cast<size_t>(group.size());
  std::vector<char> in(kLen, 0), all(kLen * ranks, 0);
  std::copy_n(mine.data(), std::min(mine.size(), kLen - 1), in.data());
  group.all_gather(all.data(), in.data(), static_cast<int64_t>(kLen));
  std::vector<std::string> out;
  for (size_t r = 0; r < ranks; ++r) out.emplace_back(all.data() + r * kLen);
  return out;
}

}  // namespace ft

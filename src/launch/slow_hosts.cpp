#include "launch/slow_hosts.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"

namespace ft {

std::vector<SlowHost> sniffed_slow_hosts(const std::string& run_dir, double since) {
  const std::string path = run_dir + "/sniff.json";
  std::vector<SlowHost> out;
  if (!std::filesystem::exists(path)) return out;
  try {
    const nlohmann::json j = nlohmann::json::parse(read_file(path));
    if (j.at("at").get<double>() < since) return out;
    const int64_t step = j.at("step").get<int64_t>();
    for (const nlohmann::json& s : j.at("slow")) {
      const std::string host = s.at("host").get<std::string>();
      if (host.empty()) continue;
      const std::string check = s.at("check").get<std::string>();
      const std::string why = fmt::format("{} {:.2f}x the median of its peers (rank {}, sniff after step {})",
                                          check == "gemm" ? std::string("GEMM") : check.substr(5) + " link",
                                          s.at("ratio").get<double>(), s.at("rank").get<int>(), step);
      auto it = std::find_if(out.begin(), out.end(), [&](const SlowHost& h) { return h.name == host; });
      if (it == out.end())
        out.push_back({host, why});
      else
        it->why += "; " + why;
    }
  } catch (const std::exception& e) {
    log_warn("supervisor: {} cannot be read ({}); no host is left out for being slow", path, e.what());
    out.clear();
  }
  return out;
}

}  // namespace ft

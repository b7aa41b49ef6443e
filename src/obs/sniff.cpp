#include "obs/sniff.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "util/median.h"

namespace ft::obs {
namespace {

// Names every rank whose value (>= 0) exceeds margin x the median of the others' values.
void judge(const std::string& check, const std::vector<double>& t, const SniffReport& r, double margin,
           double min_excess_s, std::vector<SniffSlow>& out) {
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] < 0) continue;
    std::vector<double> peers;
    for (size_t j = 0; j < t.size(); ++j)
      if (j != i && t[j] >= 0) peers.push_back(t[j]);
    if (peers.empty()) continue;
    const double m = median(peers);
    if (t[i] > margin * m && t[i] - m > min_excess_s)
      out.push_back({.check = check, .who = r.ranks[i], .seconds = t[i], .median_s = m, .ratio = m > 0 ? t[i] / m : 0});
  }
}

}  // namespace

const char* sniff_axis_name(SniffAxis a) {
  static constexpr const char* kNames[] = {"dp", "tp", "pp", "cp"};
  return kNames[static_cast<size_t>(a)];
}

std::vector<std::string> SniffReport::slow_hosts() const {
  std::vector<std::pair<int, std::string>> by_rank;
  for (const SniffSlow& s : slow) by_rank.emplace_back(s.who.rank, s.who.host);
  std::sort(by_rank.begin(), by_rank.end());
  std::vector<std::string> out;
  for (const auto& [rank, host] : by_rank)
    if (!host.empty() && std::find(out.begin(), out.end(), host) == out.end()) out.push_back(host);
  return out;
}

SniffSample faster_of(const SniffSample& a, const SniffSample& b) {
  auto faster = [](double x, double y) { return x < 0 || y < 0 ? std::max(x, y) : std::min(x, y); };
  SniffSample s;
  s.gemm_s = faster(a.gemm_s, b.gemm_s);
  for (size_t i = 0; i < kNumSniffAxes; ++i) {
    s.link_s[i] = faster(a.link_s[i], b.link_s[i]);
    s.all_reduce_s[i] = faster(a.all_reduce_s[i], b.all_reduce_s[i]);
  }
  return s;
}

SniffReport judge_sniff(int64_t step, std::vector<SniffRank> ranks, std::vector<SniffSample> samples, double margin,
                        double min_excess_s) {
  SniffReport r{.step = step, .ranks = std::move(ranks), .samples = std::move(samples), .slow = {}};
  r.ranks.resize(r.samples.size());
  std::vector<double> t(r.samples.size());
  for (size_t i = 0; i < t.size(); ++i) t[i] = r.samples[i].gemm_s;
  judge("gemm", t, r, margin, min_excess_s, r.slow);
  for (size_t a = 0; a < kNumSniffAxes; ++a) {
    for (size_t i = 0; i < t.size(); ++i) t[i] = r.samples[i].link_s[a];
    judge(std::string("link_") + sniff_axis_name(static_cast<SniffAxis>(a)), t, r, margin, min_excess_s, r.slow);
  }
  return r;
}

std::string describe(const SniffSlow& s, int64_t step) {
  const std::string what = s.check == "gemm" ? "GEMM" : s.check.substr(5) + " link (fastest round trip)";
  return fmt::format(
      "sniff after step {}: rank {}{} (dp {}, tp {}, pp {}{}): {} {:.4f} s, {:.2f}x the median of its peers ({:.4f} "
      "s)",
      step, s.who.rank, s.who.host.empty() ? "" : " on " + s.who.host, s.who.dp, s.who.tp, s.who.pp,
      s.who.cp > 0 ? fmt::format(", cp {}", s.who.cp) : "", what, s.seconds, s.ratio, s.median_s);
}

nlohmann::json to_json(const SniffReport& r) {
  nlohmann::json j = {{"step", r.step}};
  std::vector<double> gemm;
  for (const SniffSample& s : r.samples) gemm.push_back(s.gemm_s);
  j["gemm_s"] = gemm;
  nlohmann::json link = nlohmann::json::object(), ar = nlohmann::json::object();
  for (size_t a = 0; a < kNumSniffAxes; ++a) {
    std::vector<double> l, x;
    for (const SniffSample& s : r.samples) l.push_back(s.link_s[a]), x.push_back(s.all_reduce_s[a]);
    if (std::any_of(l.begin(), l.end(), [](double v) { return v >= 0; }))
      link[sniff_axis_name(static_cast<SniffAxis>(a))] = l;
    if (std::any_of(x.begin(), x.end(), [](double v) { return v >= 0; }))
      ar[sniff_axis_name(static_cast<SniffAxis>(a))] = x;
  }
  j["link_s"] = link;
  j["all_reduce_s"] = ar;
  j["slow"] = nlohmann::json::array();
  for (const SniffSlow& s : r.slow)
    j["slow"].push_back({{"check", s.check},
                         {"rank", s.who.rank},
                         {"host", s.who.host},
                         {"dp", s.who.dp},
                         {"tp", s.who.tp},
                         {"pp", s.who.pp},
                         {"cp", s.who.cp},
                         {"seconds", s.seconds},
                         {"median_s", s.median_s},
                         {"ratio", s.ratio}});
  j["slow_hosts"] = r.slow_hosts();
  return j;
}

}  // namespace ft::obs

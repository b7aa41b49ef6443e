#include "data/loader/mixture.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "data/loader/sequence_plan.h"
#include "util/error.h"
#include "util/hash.h"
#include "util/permutation.h"
#include "util/strings.h"

namespace ft {

std::vector<MixtureSource> parse_mixture(const std::string& spec, const std::string& default_path) {
  const char* hint =
      "write data.mixture = \"ru=0.5, en=0.5\" (languages of data.path) or "
      "\"DIR_OR_URL[#LANG]=WEIGHT, ...\"";
  std::vector<MixtureSource> out;
  std::set<std::string> names;
  for (std::string_view raw : split(spec, ',')) {
    std::string item(trim(raw));
    if (item.empty()) continue;
    size_t eq = item.rfind('=');
    if (eq == std::string::npos) throw Error(fmt::format("data.mixture: \"{}\" has no \"=WEIGHT\"", item), hint);
    std::string what(trim(std::string_view(item).substr(0, eq))), w(trim(std::string_view(item).substr(eq + 1)));
    MixtureSource s;
    char* end = nullptr;
    s.weight = std::strtod(w.c_str(), &end);
    if (w.empty() || *end != '\0' || !std::isfinite(s.weight) || s.weight < 0) {
      throw Error(fmt::format("data.mixture: the weight of \"{}\" is \"{}\", not a number >= 0", what, w), hint);
    }
    // DIR_OR_URL[#LANG]: a '/', a URL, a leading '.' or a "#LANG" make it a path ("ds_man#en" is the
    // directory ds_man); a bare word is a language of data.path, or, without data.path, a directory.
    // (The error_code form: a name too long for the file system throws otherwise — found by
    // tests/fuzz/fuzz_mixture.cpp.)
    std::error_code ec;
    const bool is_path = what.find('/') != std::string::npos || what.find("://") != std::string::npos ||
                         what.rfind(".", 0) == 0 || what.find('#') != std::string::npos ||
                         (default_path.empty() && std::filesystem::is_directory(what, ec));
    if (!is_path) {  // a language of data.path
      if (default_path.empty()) {
        throw Error(fmt::format("data.mixture: \"{}\" names a language but data.path is not set", what),
                    fmt::format("set data.path to the prepared dataset whose languages are mixed, or name a "
                                "directory as {}#LANG or ./{}",
                                what, what));
      }
      s.path = default_path;
      s.language = what;
      s.name = what;
    } else {
      size_t hash = what.find('#');
      s.path = what.substr(0, hash);
      if (hash != std::string::npos) s.language = what.substr(hash + 1);
      // "#de" alone names no dataset (found by tests/fuzz/fuzz_mixture.cpp: it read as the path "").
      if (s.path.empty())
        throw Error(fmt::format("data.mixture: \"{}\" names no dataset before the '#'", what),
                    "write DIR_OR_URL#LANG, or LANG alone for a language of data.path");
      std::string base = std::filesystem::path(s.path).lexically_normal().filename().string();
      if (base.empty()) base = std::filesystem::path(s.path).lexically_normal().parent_path().filename().string();
      s.name = s.language.empty() ? base : base + "_" + s.language;
    }
    if (s.name.empty() ||
        s.name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") !=
            std::string::npos) {
      throw Error(fmt::format("data.mixture: \"{}\" gives the source name \"{}\"; names are letters, digits, '_', "
                              "'-', '.'",
                              what, s.name),
                  hint);
    }
    if (!names.insert(s.name).second) {
      throw Error(fmt::format("data.mixture: two sources are named \"{}\"", s.name),
                  "each dataset (or dataset#language) may appear once");
    }
    out.push_back(std::move(s));
  }
  if (out.empty()) throw Error("data.mixture is empty", hint);
  double total = 0;
  for (auto& s : out) total += s.weight;
  if (!(total > 0)) throw Error("data.mixture: every weight is 0", "give at least one source a positive weight");
  // Weights near the double's limit add up to infinity, and every quota to 0 (found by
  // tests/fuzz/fuzz_mixture.cpp: the quotas were then handed out one by one, not by weight).
  if (!std::isfinite(total))
    throw Error("data.mixture: the weights add up to more than a double holds", "write them as 0.3, 0.7 or 3, 7");
  return out;
}

std::string mixture_history_to_json(const std::vector<MixtureSegment>& history) {
  nlohmann::json j = nlohmann::json::array();
  for (const MixtureSegment& s : history) j.push_back({{"from_sample", s.from_sample}, {"weights", s.weights}});
  return j.dump();
}

std::vector<MixtureSegment> mixture_history_from_json(const std::string& text) {
  std::vector<MixtureSegment> out;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_array()) throw Error("checkpoint: loader.mixture is not a JSON array", "the checkpoint is damaged");
  for (const auto& e : j) {
    if (!e.is_object() || !e.contains("from_sample") || !e["from_sample"].is_number_integer() ||
        !e.contains("weights") || !e["weights"].is_object()) {
      throw Error("checkpoint: a loader.mixture entry lacks from_sample or weights", "the checkpoint is damaged");
    }
    MixtureSegment s;
    s.from_sample = e["from_sample"].get<int64_t>();
    for (auto& [k, v] : e["weights"].items()) s.weights[k] = v.get<double>();
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<int64_t> apportion(const std::vector<double>& weights, int64_t total) {
  double sum = std::accumulate(weights.begin(), weights.end(), 0.0);
  std::vector<int64_t> q(weights.size(), 0);
  std::vector<std::pair<double, size_t>> rem;
  int64_t given = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    double exact = weights[i] / sum * static_cast<double>(total);
    q[i] = static_cast<int64_t>(std::floor(exact));
    given += q[i];
    rem.emplace_back(exact - static_cast<double>(q[i]), i);
  }
  std::stable_sort(rem.begin(), rem.end(), [](auto& a, auto& b) { return a.first > b.first; });
  for (size_t k = 0; given < total; ++k, ++given) ++q[rem[k % rem.size()].second];
  return q;
}

MixturePlan::MixturePlan(std::vector<std::string> names, std::vector<const SequencePlan*> lanes, int64_t batch,
                         uint64_t seed, std::vector<MixtureSegment> history)
    : names_(std::move(names)),
      lanes_(std::move(lanes)),
      batch_(batch),
      period_(batch * kRowsPerPeriod),
      seed_(seed),
      history_(std::move(history)) {
  FT_CHECK(!history_.empty() && history_[0].from_sample == 0, "a mixture history starts at sample 0");
  for (const MixtureSegment& seg : history_)
    for (auto& [n, w] : seg.weights)
      if (std::find(names_.begin(), names_.end(), n) == names_.end()) names_.push_back(n);
  for (const std::string& n : names_) name_keys_.push_back(hash_string(n));
  const size_t K = names_.size();
  const int64_t B = batch_, R = kRowsPerPeriod, W = period_;
  for (size_t q = 0; q < history_.size(); ++q) {
    const MixtureSegment& h = history_[q];
    FT_CHECK(h.from_sample % B == 0 && (q == 0 || h.from_sample > history_[q - 1].from_sample),
             "mixture segment at sample {}", h.from_sample);
    Segment seg;
    seg.from = h.from_sample;
    std::vector<double> w(K, 0.0);
    for (size_t i = 0; i < K; ++i) {
      auto it = h.weights.find(names_[i]);
      if (it != h.weights.end()) w[i] = it->second;
    }
    if (!(std::accumulate(w.begin(), w.end(), 0.0) > 0))
      throw Error(fmt::format("data.mixture: every weight is 0 from sample {}", h.from_sample),
                  "give a source a positive weight");
    seg.quota = apportion(w, W);
    // The period's samples in order of their ideal times (k + 1/2) / n_s, ties by source.
    std::vector<std::pair<int64_t, int32_t>> items;  // (k, source)
    for (size_t i = 0; i < K; ++i)
      for (int64_t k = 0; k < seg.quota[i]; ++k) items.emplace_back(k, static_cast<int32_t>(i));
    std::sort(items.begin(), items.end(), [&](const auto& a, const auto& b) {
      // (2ka+1)/na < (2kb+1)/nb  <=>  (2ka+1)·nb < (2kb+1)·na
      __int128 l = static_cast<__int128>(2 * a.first + 1) * seg.quota[static_cast<size_t>(b.second)];
      __int128 r = static_cast<__int128>(2 * b.first + 1) * seg.quota[static_cast<size_t>(a.second)];
      return l != r ? l < r : a.second < b.second;
    });
    seg.table.assign(static_cast<size_t>(W), 0);
    seg.crank.assign(static_cast<size_t>(W), 0);
    seg.m.assign(K * static_cast<size_t>(B), 0);
    for (int64_t j = 0; j < B; ++j) {
      uint64_t key = mix64(seed_ ^ mix64(0x6d69787475726500ull + static_cast<uint64_t>(j) * 0x9e3779b97f4a7c15ull +
                                         static_cast<uint64_t>(q)));
      for (int64_t r = 0; r < R; ++r) {
        int64_t idx =
            j * R + static_cast<int64_t>(permute_index(static_cast<uint64_t>(r), static_cast<uint64_t>(R), key));
        seg.table[static_cast<size_t>(r * B + j)] = items[static_cast<size_t>(idx)].second;
      }
      for (int64_t r = 0; r < R; ++r) {
        size_t i = static_cast<size_t>(r * B + j);
        int32_t s = seg.table[i];
        seg.crank[i] =
            static_cast<int32_t>(seg.m[static_cast<size_t>(s) * static_cast<size_t>(B) + static_cast<size_t>(j)]++);
      }
    }
    seg.base.assign(K * static_cast<size_t>(B), 0);
    if (q > 0) {  // lanes continue from what the previous segment consumed
      const Segment& prev = segments_.back();
      const int64_t d = seg.from - prev.from, periods = d / W, rows = (d % W) / B;
      for (size_t i = 0; i < K * static_cast<size_t>(B); ++i) seg.base[i] = prev.base[i] + periods * prev.m[i];
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < B; ++j) {
          size_t s = static_cast<size_t>(prev.table[static_cast<size_t>(r * B + j)]);
          ++seg.base[s * static_cast<size_t>(B) + static_cast<size_t>(j)];
        }
    }
    segments_.push_back(std::move(seg));
  }
}

const MixturePlan::Segment& MixturePlan::segment_of(int64_t g) const {
  size_t q = segments_.size() - 1;
  while (q > 0 && segments_[q].from > g) --q;
  return segments_[q];
}

int64_t MixturePlan::quota(int64_t g, int i) const {
  return segment_of(g).quota[static_cast<size_t>(i)];
}

int64_t MixturePlan::samples_of(int i, int64_t end) const {
  int64_t n = 0;
  for (size_t q = 0; q < segments_.size(); ++q) {
    const Segment& seg = segments_[q];
    int64_t stop = std::min(end, q + 1 < segments_.size() ? segments_[q + 1].from : end);
    if (stop <= seg.from) break;
    const int64_t d = stop - seg.from;
    n += d / period_ * seg.quota[static_cast<size_t>(i)];
    for (int64_t k = 0; k < d % period_; ++k) n += seg.table[static_cast<size_t>(k)] == i;
  }
  return n;
}

MixturePlan::Pick MixturePlan::pick(int64_t g) const {
  FT_CHECK(g >= 0, "negative sample index {}", g);
  const Segment& seg = segment_of(g);
  const int64_t d = g - seg.from, p = d / period_, i = d % period_, j = i % batch_;
  const int32_t s = seg.table[static_cast<size_t>(i)];
  FT_CHECK(static_cast<size_t>(s) < lanes_.size() && lanes_[static_cast<size_t>(s)],
           "sample {} belongs to mixture source \"{}\", which this run does not read", g,
           names_[static_cast<size_t>(s)]);
  const size_t sj = static_cast<size_t>(s) * static_cast<size_t>(batch_) + static_cast<size_t>(j);
  const int64_t l = seg.base[sj] + p * seg.m[sj] + seg.crank[static_cast<size_t>(i)];
  const SequencePlan& lanes = *lanes_[static_cast<size_t>(s)];
  const uint64_t begin = lanes.lane_begin(j), size = lanes.lane_begin(j + 1) - begin;
  const uint64_t pass = static_cast<uint64_t>(l) / size, pos = static_cast<uint64_t>(l) % size;
  const uint64_t key = mix64(seed_ ^ mix64(name_keys_[static_cast<size_t>(s)] + pass * 0x9e3779b97f4a7c15ull +
                                           static_cast<uint64_t>(j) * 0xbf58476d1ce4e5b9ull));
  return {s, begin + permute_index(pos, size, key), static_cast<int64_t>(pass)};
}

}  // namespace ft

// libFuzzer target: data.mixture. Input: the mixture text on the first line, data.path on the
// second (may be empty), then 8 bytes of a sample count. parse_mixture returns named sources with
// finite weights >= 0 (at least one > 0, names unique) or throws ft::Error; apportion's quotas of
// the count are >= 0 and add up to it.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>

#include "data/loader/mixture.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  const size_t eol = in.find('\n');
  const std::string spec = in.substr(0, eol);
  std::string rest = eol == std::string::npos ? "" : in.substr(eol + 1);
  const size_t eol2 = rest.find('\n');
  const std::string path = rest.substr(0, eol2);
  rest = eol2 == std::string::npos ? "" : rest.substr(eol2 + 1);
  std::vector<ft::MixtureSource> sources;
  try {
    sources = ft::parse_mixture(spec, path);
  } catch (const ft::Error&) {
    return 0;
  }
  if (sources.empty()) __builtin_trap();
  std::set<std::string> names;
  std::vector<double> weights;
  bool positive = false;
  for (const ft::MixtureSource& s : sources) {
    if (s.name.empty() || !names.insert(s.name).second || s.path.empty()) __builtin_trap();
    if (!std::isfinite(s.weight) || s.weight < 0) __builtin_trap();
    positive = positive || s.weight > 0;
    weights.push_back(s.weight);
  }
  if (!positive) __builtin_trap();
  uint64_t raw = 0;
  std::memcpy(&raw, rest.data(), std::min<size_t>(rest.size(), sizeof raw));
  const int64_t total = static_cast<int64_t>(raw % (uint64_t{1} << 40));  // B x 100 samples, B < 2^33
  const std::vector<int64_t> q = ft::apportion(weights, total);
  int64_t sum = 0;
  for (int64_t x : q) {
    if (x < 0) __builtin_trap();
    sum += x;
  }
  if (q.size() != weights.size() || sum != total) __builtin_trap();
  return 0;
}

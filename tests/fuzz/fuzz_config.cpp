// libFuzzer target: the config layer — arbitrary bytes as a TOML file plus --set overrides (the
// text after the first NUL byte, one KEY=VALUE per line). Loading either succeeds with a
// validated Config or throws ft::Error — never crashes, hangs or throws anything else — and what
// loads can be written out as TOML (its JSON dump) and loaded back to the same values.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "util/error.h"

namespace {

std::string as_toml(const nlohmann::json& j) {
  std::string out;
  for (auto& [section, keys] : j.items()) {
    out += "[" + section + "]\n";
    for (auto& [k, v] : keys.items()) out += k + " = " + v.dump() + "\n";
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  const std::string toml = in.substr(0, nul);
  std::vector<std::string> sets;
  if (nul != std::string::npos) {
    std::string rest = in.substr(nul + 1), line;
    for (char c : rest + "\n") {
      if (c == '\n') {
        if (!line.empty()) sets.push_back(line);
        line.clear();
      } else {
        line += c;
      }
    }
  }
  ft::Config cfg;
  try {
    cfg = ft::load_config_text(toml, "fuzz.toml", sets);
  } catch (const ft::Error&) {
    return 0;  // bad input, said in words
  }
  const nlohmann::json dumped = cfg.to_json();
  try {
    ft::Config again = ft::load_config_text(as_toml(dumped), "again.toml", {});
    if (again.to_json() != dumped) __builtin_trap();  // what loads, loads again the same
  } catch (const ft::Error&) {
    __builtin_trap();  // a config we accepted cannot be written down and read back
  }
  return 0;
}

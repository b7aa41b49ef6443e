// libFuzzer target: arbitrary bytes as manifest.json. Parsing either succeeds with a manifest
// whose totals agree with its shards, or throws ft::Error — never crashes.
#include <cstdint>
#include <string>

#include "data/dataset_manifest.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    ft::DatasetManifest m = ft::DatasetManifest::parse(text, "fuzz/manifest.json");
    uint64_t tokens = 0;
    for (const auto& s : m.train.shards) tokens += s.tokens;
    if (tokens != m.train.tokens) __builtin_trap();
    if (m.token_bytes != 2 && m.token_bytes != 4) __builtin_trap();
    // What we parse, we can write and parse again.
    ft::DatasetManifest again = ft::DatasetManifest::parse(m.to_json_text(), "again");
    if (again.to_json_text() != m.to_json_text()) __builtin_trap();
  } catch (const ft::Error&) {
  }
  return 0;
}

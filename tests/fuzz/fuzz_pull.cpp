// libFuzzer target: `data pull`'s URL and the local path of each key it lists. Input: the URL on
// the first line, one listed key per line after it. The URL parses or throws ft::Error; a parsed
// URL prints and parses back to itself; each key is skipped (outside the prefix), refused with
// ft::Error (it would escape the directory) or mapped to a relative path below the directory that
// the key ends with — never anything else.
#include <cstdint>
#include <filesystem>
#include <string>

#include "data/objstore/pull_path.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  const size_t eol = in.find('\n');
  ft::ObjectUrl u;
  try {
    u = ft::ObjectUrl::parse(in.substr(0, eol));
  } catch (const ft::Error&) {
    return 0;
  }
  if (u.bucket.empty() || (u.scheme != "s3" && u.scheme != "gs")) __builtin_trap();
  const ft::ObjectUrl again = ft::ObjectUrl::parse(u.str());  // a parsed URL is a valid one
  if (again.scheme != u.scheme || again.bucket != u.bucket || again.prefix != u.prefix) __builtin_trap();
  std::string prefix = u.prefix;
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  for (size_t begin = eol; begin != std::string::npos && begin < in.size();) {
    const size_t end = in.find('\n', begin + 1);
    const std::string key = in.substr(begin + 1, end == std::string::npos ? std::string::npos : end - begin - 1);
    begin = end;
    std::optional<std::string> rel;
    try {
      rel = ft::pull_relative_path(u, key);
    } catch (const ft::Error&) {
      continue;
    }
    if (!rel) continue;
    // Below the prefix as a directory (or the object the URL names), relative, and nothing in it
    // climbs out.
    if (key != prefix && key.rfind(prefix.empty() ? "" : prefix + "/", 0) != 0) __builtin_trap();
    if (rel->empty() || (*rel)[0] == '/' || key.size() < rel->size() ||
        key.compare(key.size() - rel->size(), rel->size(), *rel) != 0)
      __builtin_trap();
    for (const auto& piece : std::filesystem::path(*rel))
      if (piece == ".." || piece == ".") __builtin_trap();
  }
  return 0;
}

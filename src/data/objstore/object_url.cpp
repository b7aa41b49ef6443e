// ObjectUrl and the local path of each pulled key: pure string work, apart from the stores' clients
// (the fuzzer links this file alone: tests/fuzz/fuzz_pull.cpp).
#include <filesystem>

#include "data/objstore/object_store.h"
#include "data/objstore/pull_path.h"
#include "util/error.h"

namespace ft {

bool ObjectUrl::is_object_url(const std::string& s) {
  return s.rfind("s3://", 0) == 0 || s.rfind("gs://", 0) == 0;
}

ObjectUrl ObjectUrl::parse(const std::string& url) {
  if (!is_object_url(url))
    throw Error(fmt::format("{}: not an s3:// or gs:// URL", url), "write s3://bucket/prefix or gs://bucket/prefix");
  ObjectUrl u;
  u.scheme = url.substr(0, 2);
  std::string rest = url.substr(5);
  size_t slash = rest.find('/');
  u.bucket = rest.substr(0, slash);
  u.prefix = slash == std::string::npos ? "" : rest.substr(slash + 1);
  // S3's rule; GCS also allows '_' (and up to 222 characters in dotted names).
  const char* allowed =
      u.scheme == "gs" ? "abcdefghijklmnopqrstuvwxyz0123456789.-_" : "abcdefghijklmnopqrstuvwxyz0123456789.-";
  size_t max_len = u.scheme == "gs" ? 222 : 63;
  if (u.bucket.empty() || u.bucket.size() > max_len || u.bucket.find_first_not_of(allowed) != std::string::npos) {
    throw Error(fmt::format("{}: \"{}\" is not a valid bucket name", url, u.bucket),
                u.scheme == "gs" ? "bucket names are lowercase letters, digits, '.', '-' and '_'"
                                 : "bucket names are 1-63 lowercase letters, digits, '.' and '-'");
  }
  return u;
}

std::optional<std::string> pull_relative_path(const ObjectUrl& u, const std::string& key) {
  // Listed without a trailing '/', and the listing matches the prefix as a string: s3://b/ds1
  // lists ds1_flip/ too. The URL names a directory (or one object), so only keys equal to the
  // prefix or below "prefix/" are pulled.
  std::string list_prefix = u.prefix;
  while (!list_prefix.empty() && list_prefix.back() == '/') list_prefix.pop_back();
  const std::string below = list_prefix.empty() ? "" : list_prefix + "/";
  if (!key.empty() && key.back() == '/') return std::nullopt;  // "folder" marker
  if (key != list_prefix && key.rfind(below, 0) != 0) return std::nullopt;
  std::string rel = key.substr(std::min(list_prefix.size(), key.size()));
  while (!rel.empty() && rel[0] == '/') rel.erase(0, 1);
  if (rel.empty()) rel = std::filesystem::path(key).filename().string();
  if (rel.empty()) return std::nullopt;  // an empty key (found by tests/fuzz/fuzz_pull.cpp): no file to name
  for (const auto& piece : std::filesystem::path(rel)) {
    if (piece == ".." || piece == "." || piece.empty()) {
      throw Error(fmt::format("{}://{}/{}: the key escapes the target directory", u.scheme, u.bucket, key),
                  "refusing to write outside the pull directory");
    }
  }
  return rel;
}

}  // namespace ft

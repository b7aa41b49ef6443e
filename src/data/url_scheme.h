// Which locations a data path may name: a local path, s3://bucket/prefix or gs://bucket/prefix.
// Any other URL ("ftp://host/x", "http://…", "hdfs://…", upper-case "GS://b/x") would otherwise
// be read as a local path (a directory named "ftp:"), and its errors would blame a missing file:
// refused at once, naming the scheme.
//
//   ft::check_url_scheme(cfg.data.path, "data.path");   // throws ft::Error for "ftp://host/x"
//   ft::check_url_scheme(out_dir, "--out");
#pragma once

#include <fmt/format.h>

#include <cctype>
#include <string>

#include "util/error.h"

namespace ft {

inline void check_url_scheme(const std::string& path, const std::string& what) {
  const size_t sep = path.find("://");
  if (sep == std::string::npos || sep == 0) return;
  const std::string scheme = path.substr(0, sep);
  // RFC 3986: a letter, then letters, digits, '+', '-', '.'; anything else ("dir/a://b") is a path.
  if (!std::isalpha(static_cast<unsigned char>(scheme[0]))) return;
  for (char c : scheme)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.') return;
  std::string lower = scheme;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (scheme == "s3" || scheme == "gs") return;
  const std::string hint = "write s3://bucket/prefix or gs://bucket/prefix, or fetch the data to a local directory";
  if (lower == "s3" || lower == "gs")
    throw Error(fmt::format("{} {}: URL schemes are lower case: {}://", what, path, lower), hint);
  throw Error(
      fmt::format("{} {}: the URL scheme {}:// is not supported (only s3:// and gs:// are)", what, path, scheme), hint);
}

}  // namespace ft

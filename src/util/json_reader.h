// ft::JsonReader: typed field access into a parsed JSON document (a data or checkpoint manifest)
// whose errors name the document and the JSON path, with the caller's hint:
//
//   JsonReader r(path, "the manifest is damaged; re-run `fluxtrain prepare`");
//   uint64_t v = r.u64(root, "version", "");   // error: <path>: .version must be a non-negative integer
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "util/error.h"

namespace ft {

class JsonReader {
 public:
  using json = nlohmann::json;

  JsonReader(std::string name, std::string hint) : name_(std::move(name)), hint_(std::move(hint)) {}

  // obj[key]; `path` is obj's own JSON path, used in the error.
  const json& at(const json& obj, const std::string& key, const std::string& path) const {
    if (!obj.is_object()) fail(path, "is not a JSON object");
    auto it = obj.find(key);
    if (it == obj.end()) fail(path + "." + key, "is missing");
    return *it;
  }
  uint64_t u64(const json& obj, const std::string& key, const std::string& path) const {
    const json& v = at(obj, key, path);
    if (!v.is_number_unsigned()) fail(path + "." + key, "must be a non-negative integer");
    return v.get<uint64_t>();
  }
  // An integer in [lo, hi].
  int64_t i64(const json& obj, const std::string& key, const std::string& path, int64_t lo = 0,
              int64_t hi = INT64_MAX / 4) const {
    const json& v = at(obj, key, path);
    if (!v.is_number_integer()) fail(path + "." + key, "must be an integer");
    int64_t x = 0;
    if (v.is_number_unsigned()) {
      uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(hi)) fail(path + "." + key, fmt::format("= {} is larger than {}", u, hi));
      x = static_cast<int64_t>(u);
    } else {
      x = v.get<int64_t>();
    }
    if (x < lo || x > hi) fail(path + "." + key, fmt::format("= {} is outside [{}, {}]", x, lo, hi));
    return x;
  }
  std::string str(const json& obj, const std::string& key, const std::string& path) const {
    const json& v = at(obj, key, path);
    if (!v.is_string()) fail(path + "." + key, "must be a string");
    return v.get<std::string>();
  }
  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw Error(fmt::format("{}: {} {}", name_, path, what), hint_);
  }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::string hint_;
};

}  // namespace ft

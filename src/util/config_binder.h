// ConfigBinder: binds dotted TOML keys ("model.dim") to members of the config structs, so one
// table drives parsing, validation of names and types, --set overrides and JSON dumps.
//
//   ConfigBinder b;
//   b.add("model.dim", &cfg.model.dim, "hidden size");
//   b.add_enum("train.precision", &cfg.train.precision, {{"fp32", kF32}, {"bf16", kBF16}}, "...");
//   b.set("model.dim", ConfigValue{int64_t{512}}, "configs/tiny.toml");
//
// An unknown key is an ft::Error naming the key and the closest known one; a value of the wrong
// type names the key, the value, the expected type and where the value came from.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace ft {

using ConfigValue = std::variant<bool, int64_t, double, std::string>;

std::string config_value_to_string(const ConfigValue& v);

// Parses the right-hand side of "--set key=value" the way TOML would: 12 → int, 1e-3 → float,
// true → bool, "x" or x → string.
ConfigValue parse_config_value(const std::string& text);

// Whether a float literal is too small for a double: strtod reads "1e-400" as 0 (or a subnormal),
// a value nobody wrote. parse_config_value refuses one; the TOML reader checks the file's.
bool float_underflows(const std::string& raw);

class ConfigBinder {
 public:
  void add(const std::string& key, int* p, const std::string& doc);
  void add(const std::string& key, int64_t* p, const std::string& doc);
  void add(const std::string& key, uint64_t* p, const std::string& doc);
  void add(const std::string& key, double* p, const std::string& doc);
  void add(const std::string& key, float* p, const std::string& doc);
  void add(const std::string& key, bool* p, const std::string& doc);
  void add(const std::string& key, std::string* p, const std::string& doc);

  template <typename E>
  void add_enum(const std::string& key, E* p, std::vector<std::pair<std::string, E>> names, const std::string& doc) {
    std::vector<std::string> allowed;
    for (auto& [n, e] : names) allowed.push_back(n);
    Entry entry;
    entry.doc = doc;
    entry.type = "one of " + join_quoted(allowed);
    entry.set = [p, names, key, allowed, this](const ConfigValue& v, const std::string& origin) {
      const std::string* s = std::get_if<std::string>(&v);
      if (s) {
        for (auto& [n, e] : names) {
          if (n == *s) {
            *p = e;
            return;
          }
        }
      }
      bad_value(key, v, "one of " + join_quoted(allowed), origin);
    };
    entry.get = [p, names]() -> ConfigValue {
      for (auto& [n, e] : names)
        if (e == *p) return n;
      return std::string("?");
    };
    entries_[key] = std::move(entry);
  }

  bool has(const std::string& key) const { return entries_.count(key) != 0; }
  void set(const std::string& key, const ConfigValue& v, const std::string& origin);
  ConfigValue get(const std::string& key) const;
  std::vector<std::string> keys() const;
  const std::string& doc(const std::string& key) const;

  // {"model": {"dim": 512, ...}, ...} of every bound key's current value.
  nlohmann::json to_json() const;

 private:
  struct Entry {
    std::string type, doc;
    std::function<void(const ConfigValue&, const std::string&)> set;
    std::function<ConfigValue()> get;
  };
  template <typename T>
  void add_number(const std::string& key, T* p, const std::string& doc, const char* type);
  static std::string join_quoted(const std::vector<std::string>& v);
  [[noreturn]] static void bad_value(const std::string& key, const ConfigValue& v, const std::string& expected,
                                     const std::string& origin);
  std::map<std::string, Entry> entries_;
};

}  // namespace ft

#include "util/config_binder.h"

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "util/error.h"
#include "util/strings.h"

namespace ft {

std::string config_value_to_string(const ConfigValue& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>)
          return x ? "true" : "false";
        else if constexpr (std::is_same_v<T, std::string>)
          return "\"" + x + "\"";
        else
          return fmt::format("{}", x);
      },
      v);
}

namespace {

// TOML's prefixed integers: 0x (hex), 0o (octal), 0b (binary), unsigned, underscores already
// removed. nullopt when the text is not one (or does not fit in int64: then it is read as a float).
std::optional<int64_t> prefixed_integer(const std::string& t) {
  if (t.size() < 3 || t[0] != '0') return std::nullopt;
  const int base = t[1] == 'x' ? 16 : t[1] == 'o' ? 8 : t[1] == 'b' ? 2 : 0;
  if (base == 0) return std::nullopt;
  const char* digits = t.c_str() + 2;
  if (!std::isxdigit(static_cast<unsigned char>(*digits))) return std::nullopt;  // no sign, no space
  char* end = nullptr;
  errno = 0;
  long long i = std::strtoll(digits, &end, base);
  if (end != t.c_str() + t.size() || errno != 0) return std::nullopt;
  return int64_t{i};
}

}  // namespace

bool float_underflows(const std::string& raw) {
  std::string t(trim(raw));
  std::erase(t, '_');
  if (t.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const double d = std::strtod(t.c_str(), &end);
  return end == t.c_str() + t.size() && errno == ERANGE && std::abs(d) < std::numeric_limits<double>::min();
}

ConfigValue parse_config_value(const std::string& raw) {
  std::string text(trim(raw));
  if (text == "true") return true;
  if (text == "false") return false;
  if (text.size() >= 2 && (text.front() == '"' || text.front() == '\'') && text.back() == text.front())
    return text.substr(1, text.size() - 2);
  {
    std::string t = text;
    std::erase(t, '_');
    if (auto i = prefixed_integer(t)) return *i;
    char* end = nullptr;
    errno = 0;
    long long i = std::strtoll(t.c_str(), &end, 10);
    if (!t.empty() && end == t.c_str() + t.size() && errno == 0) return int64_t{i};
    errno = 0;
    double d = std::strtod(t.c_str(), &end);
    if (!t.empty() && end == t.c_str() + t.size()) {
      if (float_underflows(text)) {
        throw Error(fmt::format("{} is too small for a double: it would read as {}", text, d),
                    "write 0 if zero is meant");
      }
      return d;
    }
  }
  return text;
}

std::string ConfigBinder::join_quoted(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", \"" : "\"") + v[i] + "\"";
  return out;
}

void ConfigBinder::bad_value(const std::string& key, const ConfigValue& v, const std::string& expected,
                             const std::string& origin) {
  throw Error(fmt::format("{}: {} = {} is not valid: expected {}", origin, key, config_value_to_string(v), expected),
              fmt::format("set it in the config file or with --set {}=VALUE", key));
}

template <typename T>
void ConfigBinder::add_number(const std::string& key, T* p, const std::string& doc, const char* type) {
  Entry e;
  e.doc = doc;
  e.type = type;
  e.set = [p, key, type](const ConfigValue& v, const std::string& origin) {
    if constexpr (std::is_floating_point_v<T>) {
      if (auto* d = std::get_if<double>(&v)) {
        // inf and nan parse as numbers (TOML and --set alike) but no setting means them.
        if (!std::isfinite(*d) || !std::isfinite(static_cast<T>(*d))) bad_value(key, v, "a finite number", origin);
        *p = static_cast<T>(*d);
        return;
      }
      if (auto* i = std::get_if<int64_t>(&v)) {
        *p = static_cast<T>(*i);
        return;
      }
    } else {
      // A float that is a whole number (1e3, 16.0; TOML and --set alike) is that integer; only
      // below 2^53, where every integer is a float, so that the value is the one written.
      ConfigValue whole = v;
      if (auto* d = std::get_if<double>(&v)) {
        if (!(std::abs(*d) < 0x1p53 && std::trunc(*d) == *d))
          bad_value(key, v, fmt::format("{} (a float counts only when it is a whole number below 2^53)", type), origin);
        whole = static_cast<int64_t>(*d);
      }
      if (auto* i = std::get_if<int64_t>(&whole)) {
        if (*i < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
            (*i > 0 && static_cast<uint64_t>(*i) > static_cast<uint64_t>(std::numeric_limits<T>::max())))
          bad_value(key, v, fmt::format("{} in range", type), origin);
        *p = static_cast<T>(*i);
        return;
      }
    }
    bad_value(key, v, type, origin);
  };
  e.get = [p]() -> ConfigValue {
    if constexpr (std::is_floating_point_v<T>)
      return static_cast<double>(*p);
    else
      return static_cast<int64_t>(*p);
  };
  entries_[key] = std::move(e);
}

void ConfigBinder::add(const std::string& key, int* p, const std::string& doc) {
  add_number(key, p, doc, "an integer");
}
void ConfigBinder::add(const std::string& key, int64_t* p, const std::string& doc) {
  add_number(key, p, doc, "an integer");
}
void ConfigBinder::add(const std::string& key, uint64_t* p, const std::string& doc) {
  add_number(key, p, doc, "a non-negative integer");
}
void ConfigBinder::add(const std::string& key, double* p, const std::string& doc) {
  add_number(key, p, doc, "a number");
}
void ConfigBinder::add(const std::string& key, float* p, const std::string& doc) {
  add_number(key, p, doc, "a number");
}

void ConfigBinder::add(const std::string& key, bool* p, const std::string& doc) {
  Entry e;
  e.doc = doc;
  e.type = "true or false";
  e.set = [p, key](const ConfigValue& v, const std::string& origin) {
    if (auto* b = std::get_if<bool>(&v))
      *p = *b;
    else
      bad_value(key, v, "true or false", origin);
  };
  e.get = [p]() -> ConfigValue { return *p; };
  entries_[key] = std::move(e);
}

void ConfigBinder::add(const std::string& key, std::string* p, const std::string& doc) {
  Entry e;
  e.doc = doc;
  e.type = "a string";
  e.set = [p](const ConfigValue& v, const std::string&) {
    *p = std::visit(
        [](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::string>)
            return x;
          else
            return config_value_to_string(x);
        },
        v);
  };
  e.get = [p]() -> ConfigValue { return *p; };
  entries_[key] = std::move(e);
}

void ConfigBinder::set(const std::string& key, const ConfigValue& v, const std::string& origin) {
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    std::string near = closest_match(key, keys());
    throw Error(fmt::format("{}: unknown config key '{}'", origin, key),
                near.empty() ? "see `fluxtrain config --keys`"
                             : fmt::format("did you mean '{}'? (`fluxtrain config --keys` lists all)", near));
  }
  it->second.set(v, origin);
}

ConfigValue ConfigBinder::get(const std::string& key) const {
  auto it = entries_.find(key);
  FT_CHECK(it != entries_.end(), "no config key {}", key);
  return it->second.get();
}

const std::string& ConfigBinder::doc(const std::string& key) const {
  return entries_.at(key).doc;
}

std::vector<std::string> ConfigBinder::keys() const {
  std::vector<std::string> out;
  for (auto& [k, e] : entries_) out.push_back(k);
  return out;
}

nlohmann::json ConfigBinder::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (auto& [k, e] : entries_) {
    auto parts = split(k, '.');
    nlohmann::json* node = &j;
    for (size_t i = 0; i + 1 < parts.size(); ++i) node = &(*node)[parts[i]];
    std::visit([&](const auto& x) { (*node)[parts.back()] = x; }, e.get());
  }
  return j;
}

}  // namespace ft

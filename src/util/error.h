// ft::Error: an error a user can act on — one line saying what is wrong (naming the file,
// key or value), plus a hint. Caught at the CLI and printed as "error: ...\nhint: ...".
//
//   throw ft::Error(fmt::format("{}: expected magic 'FTSH', found '{}'", path, magic),
//                   "the file is not a fluxtrain shard; re-run `fluxtrain prepare`");
//
// FT_CHECK(cond, fmt, args...) is for invariants of our own code (a bug if it fires).
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace ft {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, std::string hint = {}) : std::runtime_error(what), hint_(std::move(hint)) {}
  const std::string& hint() const { return hint_; }

 private:
  std::string hint_;
};

[[noreturn]] void check_failed(const char* file, int line, const char* cond, const std::string& msg);

}  // namespace ft

#define FT_CHECK(cond, ...)                                                                  \
  do {                                                                                       \
    if (!(cond)) ::ft::check_failed(__FILE__, __LINE__, #cond, fmt::format("" __VA_ARGS__)); \
  } while (0)

// An environment variable's value, or "" where it is unset.
#pragma once

#include <cstdlib>
#include <string>

namespace ft {

inline std::string env_string(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace ft

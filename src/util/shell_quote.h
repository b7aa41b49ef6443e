// A string as one word for a POSIX shell: 'it'\''s' (single quotes; an embedded quote is closed,
// escaped and reopened). For commands run through ssh or sh -c.
#pragma once

#include <string>

namespace ft {

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace ft

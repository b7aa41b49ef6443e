// Text clean-up applied to every document before tokenisation, in this order:
//   1. invalid UTF-8 → U+FFFD (each maximal invalid subsequence once; counted, never fatal);
//   2. CR LF and lone CR → LF; other C0 controls except TAB and LF, and DEL, are dropped;
//   3. Unicode NFC (ICU);
//   4. whitespace: TAB → space, runs of spaces after a line's first non-space collapse to one,
//      trailing spaces go, more than one blank line in a row becomes one, leading/trailing
//      blank lines go. Leading indentation is kept (it carries structure in code and lists).
//
//   NormalizeResult r = normalize_document(raw);   // r.text, r.invalid_utf8
//   std::string lang = detect_language(r.text);    // "ru", "en" or "other"
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ft {

struct NormalizeResult {
  std::string text;
  uint64_t invalid_utf8 = 0;  // invalid sequences replaced by U+FFFD
};

NormalizeResult normalize_document(std::string_view raw);

// Steps of normalize_document, exposed for tests.
std::string sanitize_utf8(std::string_view in, uint64_t* replaced);
std::string to_nfc(const std::string& valid_utf8);
std::string normalize_whitespace(std::string_view s);

// Unicode code points in valid UTF-8.
uint64_t count_code_points(std::string_view valid_utf8);

// By script of the letters: "ru" when Cyrillic letters are at least a quarter of the
// Latin + Cyrillic letters, "en" when there are Latin letters, else "other".
std::string detect_language(std::string_view valid_utf8);

}  // namespace ft

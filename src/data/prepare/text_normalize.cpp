#include "data/prepare/text_normalize.h"

#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include "util/error.h"

namespace ft {
namespace {

// Length of the valid UTF-8 sequence at p (1..4), or 0 when invalid. Follows Unicode's
// "well-formed UTF-8 byte sequences" table (no overlongs, no surrogates, ≤ U+10FFFF).
size_t valid_sequence(const unsigned char* p, size_t left) {
  unsigned char c = p[0];
  if (c < 0x80) return 1;
  auto cont = [&](size_t i, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
    return i < left && p[i] >= lo && p[i] <= hi;
  };
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return cont(1) && cont(2) ? 3 : 0;
  if (c == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
  if (c == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

// Bytes of the maximal prefix of an invalid sequence at p (at least 1): a lead byte followed by
// the continuation bytes that could still have completed it.
size_t invalid_span(const unsigned char* p, size_t left) {
  unsigned char c = p[0];
  size_t want = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 1;
  size_t n = 1;
  while (n < want && n < left) {
    unsigned char lo = 0x80, hi = 0xBF;
    if (n == 1) {
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    }
    if (p[n] < lo || p[n] > hi) break;
    ++n;
  }
  return n;
}

}  // namespace

std::string sanitize_utf8(std::string_view in, uint64_t* replaced) {
  std::string out;
  out.reserve(in.size());
  const auto* p = reinterpret_cast<const unsigned char*>(in.data());
  size_t n = in.size(), i = 0;
  while (i < n) {
    unsigned char c = p[i];
    if (c < 0x80) {
      if (c == '\r') {
        out.push_back('\n');
        i += (i + 1 < n && p[i + 1] == '\n') ? 2 : 1;
        continue;
      }
      if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F) {
        ++i;
        continue;
      }
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    size_t len = valid_sequence(p + i, n - i);
    if (len > 0) {
      out.append(in.data() + i, len);
      i += len;
    } else {
      out.append("\xEF\xBF\xBD");
      if (replaced) ++*replaced;
      i += invalid_span(p + i, n - i);
    }
  }
  return out;
}

std::string to_nfc(const std::string& s) {
  bool ascii = true;
  for (unsigned char c : s) {
    if (c >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii) return s;  // ASCII is already NFC
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(err);
  if (U_FAILURE(err)) throw Error(fmt::format("ICU NFC normaliser unavailable: {}", u_errorName(err)));
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size())));
  if (nfc->isNormalized(u, err) && U_SUCCESS(err)) return s;
  err = U_ZERO_ERROR;
  icu::UnicodeString norm = nfc->normalize(u, err);
  if (U_FAILURE(err)) throw Error(fmt::format("ICU NFC normalisation failed: {}", u_errorName(err)));
  std::string out;
  norm.toUTF8String(out);
  return out;
}

std::string normalize_whitespace(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t blank_run = 0;  // blank lines seen since the last text line
  bool any_text = false;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t eol = s.find('\n', pos);
    if (eol == std::string_view::npos) eol = s.size();
    std::string_view line = s.substr(pos, eol - pos);
    std::string clean;
    clean.reserve(line.size());
    bool seen_text = false, pending_space = false;
    for (char ch : line) {
      char c = ch == '\t' ? ' ' : ch;
      if (c == ' ') {
        if (seen_text)
          pending_space = true;
        else
          clean.push_back(' ');
        continue;
      }
      if (pending_space) clean.push_back(' ');
      pending_space = false;
      seen_text = true;
      clean.push_back(c);
    }
    if (!seen_text) {
      ++blank_run;
    } else {
      if (any_text) out.append(blank_run > 0 ? "\n\n" : "\n");
      out.append(clean);
      any_text = true;
      blank_run = 0;
    }
    pos = eol + 1;
  }
  return out;
}

NormalizeResult normalize_document(std::string_view raw) {
  NormalizeResult r;
  std::string valid = sanitize_utf8(raw, &r.invalid_utf8);
  r.text = normalize_whitespace(to_nfc(valid));
  return r;
}

uint64_t count_code_points(std::string_view s) {
  uint64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string detect_language(std::string_view s) {
  uint64_t latin = 0, cyrillic = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = p[i];
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') ++latin;
    // U+0400..U+04FF: lead bytes D0..D3.
    else if (c >= 0xD0 && c <= 0xD3)
      ++cyrillic;
  }
  if (cyrillic > 0 && 4 * cyrillic >= latin + cyrillic) return "ru";
  if (latin > 0) return "en";
  return "other";
}

}  // namespace ft

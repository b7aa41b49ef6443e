// Small string helpers: edit distance and closest-match suggestions for error hints,
// human-readable byte counts, splitting and trimming.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ft {

// Levenshtein distance between a and b.
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word` by edit distance ("" when there are no candidates).
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

std::vector<std::string> split(std::string_view s, char sep);
std::string_view trim(std::string_view s);
bool starts_with(std::string_view s, std::string_view prefix);

// The first `shown` names joined by ", ", then " and N more": "README, LICENSE and 3 more".
std::string name_some(const std::vector<std::string>& names, size_t shown);

// Lower-case hex of raw bytes: "\x01\xab" -> "01ab" (digests, signatures).
std::string hex_lower(std::string_view bytes);

// "1.50 GiB", "12.0 MiB", "512 B".
std::string human_bytes(double bytes);

// "1h02m", "3m05s", "12.3s".
std::string human_duration(double seconds);

}  // namespace ft

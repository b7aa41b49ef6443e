// Fast non-cryptographic hashing and counter-based random numbers. Everything random in
// fluxtrain (initialisation, data order) is a pure function of a seed and an index, so results
// do not depend on the number of threads or ranks.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

namespace ft {

// SplitMix64 finaliser: a bijective 64-bit mix.
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// FNV-1a of a string, mixed.
inline uint64_t hash_string(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return mix64(h);
}

// Uniform in (0, 1) from 64 random bits.
inline double unit_open(uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;
}

// Standard normal for (stream, index): Box–Muller on the hashed counters of index / 2; the
// even index of a pair takes the cosine branch, the odd one the sine branch.
inline void normal_pair(uint64_t stream, uint64_t pair, double* cos_branch, double* sin_branch) {
  uint64_t a = mix64(stream ^ mix64(2 * pair)), b = mix64(stream ^ mix64(2 * pair + 1));
  double r = std::sqrt(-2.0 * std::log(unit_open(a))), t = 6.283185307179586 * unit_open(b);
  *cos_branch = r * std::cos(t);
  *sin_branch = r * std::sin(t);
}

inline double normal_at(uint64_t stream, uint64_t index) {
  double c, s;
  normal_pair(stream, index / 2, &c, &s);
  return index % 2 == 0 ? c : s;
}

// out[i] = scale · normal_at(stream, first + i) for i in [0, n), one Box–Muller per pair.
inline void normal_fill(float* out, uint64_t stream, uint64_t first, int64_t n, double scale) {
  int64_t i = 0;
  if (n > 0 && first % 2 == 1) out[i++] = static_cast<float>(scale * normal_at(stream, first));
  for (; i + 1 < n; i += 2) {
    double c, s;
    normal_pair(stream, (first + static_cast<uint64_t>(i)) / 2, &c, &s);
    out[i] = static_cast<float>(scale * c);
    out[i + 1] = static_cast<float>(scale * s);
  }
  if (i < n) out[i] = static_cast<float>(scale * normal_at(stream, first + static_cast<uint64_t>(i)));
}

}  // namespace ft

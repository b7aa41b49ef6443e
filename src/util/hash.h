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
inline double unit_open(uint64_t bits) { return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53; }

// Standard normal for (stream, index): Box–Muller on two hashed counters.
inline double normal_at(uint64_t stream, uint64_t index) {
  uint64_t a = mix64(stream ^ mix64(2 * index)), b = mix64(stream ^ mix64(2 * index + 1));
  return std::sqrt(-2.0 * std::log(unit_open(a))) * std::cos(6.283185307179586 * unit_open(b));
}

}  // namespace ft

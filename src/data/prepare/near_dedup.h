// Near-duplicate documents (technical documentation repeats itself across versions): MinHash
// signatures over word shingles, banded LSH to find candidates, and the signatures' estimated
// Jaccard similarity to decide. `fluxtrain prepare --near-dup-threshold T` keeps the first of
// each group (in input order) and drops the rest, counted per language.
//
//   NearDuplicates nd({.threshold = 0.8});
//   MinHash sig = nd.signature(text);       // thread-safe: compute in parallel
//   if (nd.is_duplicate_or_add(sig)) ...    // sequential, in input order: deterministic
//
// Shingles are runs of `shingle_words` whitespace-separated words (a shorter document is one
// shingle), hashed with XXH3; permutation i's value of a shingle hash h is mix64(h ^ key_i), and
// the signature keeps the minimum per permutation (low 32 bits). With `num_perm` = b·r
// permutations in b bands of r rows, r is the largest divisor for which a pair at the threshold
// becomes a candidate with probability >= 0.99 (1 - (1 - t^r)^b); candidates are then compared
// by the fraction of equal signature entries (an unbiased estimate of the Jaccard similarity of
// their shingle sets). Memory: num_perm·4 bytes per kept document plus the band tables.
#pragma once

#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ft {

struct NearDupOptions {
  double threshold = 0.8;  // Jaccard similarity of shingle sets at which a document is a near-duplicate
  int shingle_words = 5;
  int num_perm = 128;
  uint64_t seed = 0x6e656172647570ull;
};

using MinHash = std::vector<uint32_t>;

class NearDuplicates {
 public:
  explicit NearDuplicates(const NearDupOptions& opt);
  MinHash signature(std::string_view text) const;
  // True when `sig` is at least `threshold` similar to a document added before; otherwise adds it.
  bool is_duplicate_or_add(const MinHash& sig);
  static double similarity(const MinHash& a, const MinHash& b);
  int bands() const { return bands_; }
  int rows() const { return rows_; }

 private:
  NearDupOptions opt_;
  int bands_ = 0, rows_ = 0;
  std::vector<uint64_t> keys_;
  std::vector<MinHash> kept_;
  std::vector<std::unordered_map<uint64_t, std::vector<uint32_t>>> buckets_;  // per band: hash -> kept ids
};

}  // namespace ft

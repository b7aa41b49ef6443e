#include "data/prepare/near_dedup.h"

#include <cmath>
#include <limits>

#include "util/checksum.h"
#include "util/error.h"
#include "util/hash.h"

namespace ft {

NearDuplicates::NearDuplicates(const NearDupOptions& opt) : opt_(opt) {
  if (!(opt.threshold > 0 && opt.threshold <= 1)) {
    throw Error(fmt::format("near-duplicate threshold {} must be in (0, 1]", opt.threshold),
                "e.g. --near-dup-threshold 0.8; 0 turns near-duplicate removal off");
  }
  FT_CHECK(opt.num_perm > 0 && opt.shingle_words > 0, "num_perm {} shingle_words {}", opt.num_perm, opt.shingle_words);
  rows_ = 1;
  for (int r = 1; r <= opt.num_perm; ++r) {
    if (opt.num_perm % r) continue;
    int b = opt.num_perm / r;
    double p = 1 - std::pow(1 - std::pow(opt.threshold, r), b);
    if (p >= 0.99) rows_ = r;
  }
  bands_ = opt.num_perm / rows_;
  for (int i = 0; i < opt.num_perm; ++i)
    keys_.push_back(mix64(opt.seed + static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull));
  buckets_.resize(static_cast<size_t>(bands_));
}

MinHash NearDuplicates::signature(std::string_view text) const {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    size_t j = i;
    while (j < text.size() && !std::isspace(static_cast<unsigned char>(text[j]))) ++j;
    if (j > i) words.push_back(text.substr(i, j - i));
    i = j;
  }
  MinHash sig(static_cast<size_t>(opt_.num_perm), std::numeric_limits<uint32_t>::max());
  const size_t k = static_cast<size_t>(opt_.shingle_words);
  const size_t n = words.size() >= k ? words.size() - k + 1 : (words.empty() ? 0 : 1);
  for (size_t s = 0; s < n; ++s) {
    uint64_t h = 0;
    for (size_t w = s; w < std::min(words.size(), s + k); ++w)
      h = mix64(h ^ xxh3_64(words[w].data(), words[w].size(), 17));
    for (size_t p = 0; p < sig.size(); ++p) {
      uint32_t v = static_cast<uint32_t>(mix64(h ^ keys_[p]));
      if (v < sig[p]) sig[p] = v;
    }
  }
  return sig;
}

double NearDuplicates::similarity(const MinHash& a, const MinHash& b) {
  size_t same = 0;
  for (size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
  return a.empty() ? 0 : static_cast<double>(same) / static_cast<double>(a.size());
}

bool NearDuplicates::is_duplicate_or_add(const MinHash& sig) {
  std::vector<uint64_t> band_keys(static_cast<size_t>(bands_));
  for (int b = 0; b < bands_; ++b) {
    uint64_t h = static_cast<uint64_t>(b);
    for (int r = 0; r < rows_; ++r) h = mix64(h ^ sig[static_cast<size_t>(b * rows_ + r)]);
    band_keys[static_cast<size_t>(b)] = h;
    auto it = buckets_[static_cast<size_t>(b)].find(h);
    if (it == buckets_[static_cast<size_t>(b)].end()) continue;
    for (uint32_t id : it->second)
      if (similarity(sig, kept_[id]) >= opt_.threshold) return true;
  }
  const uint32_t id = static_cast<uint32_t>(kept_.size());
  kept_.push_back(sig);
  for (int b = 0; b < bands_; ++b) buckets_[static_cast<size_t>(b)][band_keys[static_cast<size_t>(b)]].push_back(id);
  return false;
}

}  // namespace ft

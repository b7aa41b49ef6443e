// `fluxtrain data verify DIR`: checks a whole dataset — the manifest, the tokenizer's hash, and
// for every shard its header against the manifest and its checksum.
//
//   VerifyReport r = verify_dataset("data/manpages");   // never throws for a bad shard
//   if (!r.problems.empty()) ...                         // one line per bad file, naming it
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ft {

struct VerifyReport {
  uint64_t shards = 0, bytes = 0, tokens = 0;
  double seconds = 0;
  std::vector<std::string> problems;  // "<file>: what is wrong"
};

// Throws ft::Error only when the manifest itself cannot be read.
VerifyReport verify_dataset(const std::string& dir);

}  // namespace ft

// A flat file of token ids (uint16 or uint32, native little-endian), memory-mapped. Training
// samples are windows of seq_len + 1 tokens at stride seq_len; the last val_fraction of the
// windows is the validation split. Sample i of an epoch maps to a window through a seeded
// permutation of the split's windows, so the order is a function of (seed, epoch, index).
#pragma once

#include <cstdint>
#include <string>

namespace ft {

class TokenFile {
 public:
  // Throws ft::Error naming the file when it is missing, empty, or not a whole number of tokens.
  TokenFile(const std::string& path, const std::string& dtype);
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  int64_t num_tokens() const { return n_; }
  int32_t at(int64_t i) const;
  uint32_t max_token() const;  // scans the file
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const void* data_ = nullptr;
  size_t bytes_ = 0;
  int width_ = 2;
  int64_t n_ = 0;
};

}  // namespace ft

// The object-store upload tests' helpers (data_s3_upload_test, data_gcs_upload_test): the server
// their python driver started, named by environment variables, and seeded random files to send.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

namespace ft::upload_test {

inline std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// A file of n random bytes (from `seed`) in the test's temporary directory; its path.
inline std::string random_file(const std::string& prefix, size_t n, uint32_t seed) {
  std::string data(n, '\0');
  std::mt19937 rng(seed);
  for (auto& c : data) c = static_cast<char>(rng());
  std::string path =
      ::testing::TempDir() + "/" + prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(seed);
  std::ofstream(path, std::ios::binary) << data;
  return path;
}

inline std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace ft::upload_test

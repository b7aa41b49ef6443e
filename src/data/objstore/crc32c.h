// CRC-32C (Castagnoli, the checksum Google Cloud Storage keeps per object): a 256-entry table
// and, where the CPU has SSE4.2 (checked at run time), its crc32 instruction. Debian has no C
// library for it (only a Python module), so it is here, tested against RFC 3720's vectors.
//
//   uint32_t c = crc32c(data, n);                  // whole buffer
//   uint32_t c2 = crc32c_extend(crc32c(a, na), b, nb);   // == crc32c of a followed by b
//   uint32_t from_gcs = crc32c_from_base64("yZRlqg==");  // the JSON API's big-endian base64 form
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace ft {

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t bytes);
inline uint32_t crc32c(const void* data, size_t bytes) {
  return crc32c_extend(0, data, bytes);
}
// CRC-32C of a file's bytes; throws ft::Error naming the file when it cannot be read.
uint32_t crc32c_file(const std::string& path);

// GCS writes the CRC as base64 of its 4 big-endian bytes; nullopt when the text is not that.
std::optional<uint32_t> crc32c_from_base64(const std::string& b64);
std::string crc32c_to_base64(uint32_t crc);

}  // namespace ft

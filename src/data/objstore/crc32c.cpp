#include "data/objstore/crc32c.h"

#include <array>
#include <cstdio>
#include <cstring>
#include <vector>

#include "util/error.h"

namespace ft {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // reflected Castagnoli polynomial

constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kTable = make_table();

uint32_t table_update(uint32_t c, const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) c = kTable[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t sse42_update(uint32_t c, const uint8_t* p, size_t n) {
  uint64_t c64 = c;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c64 = __builtin_ia32_crc32di(c64, v);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c64);
  while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
  return c32;
}
const bool kHaveSse42 = __builtin_cpu_supports("sse4.2");
#endif

const char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
#if defined(__x86_64__)
  if (kHaveSse42) return ~sse42_update(c, p, bytes);
#endif
  return ~table_update(c, p, bytes);
}

uint32_t crc32c_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw Error(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  std::vector<char> buf(size_t{4} << 20);
  uint32_t c = 0;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) c = crc32c_extend(c, buf.data(), n);
  bool bad = std::ferror(f);
  std::fclose(f);
  if (bad) throw Error(fmt::format("reading {} failed", path));
  return c;
}

std::optional<uint32_t> crc32c_from_base64(const std::string& b64) {
  if (b64.size() != 8 || b64.substr(6) != "==") return std::nullopt;
  uint32_t bits = 0;  // 6 characters carry 36 bits; the last 4 must be zero
  uint64_t acc = 0;
  for (int i = 0; i < 6; ++i) {
    const char* pos = std::strchr(kB64, b64[static_cast<size_t>(i)]);
    if (!pos || b64[static_cast<size_t>(i)] == '\0') return std::nullopt;
    acc = (acc << 6) | static_cast<uint64_t>(pos - kB64);
  }
  if (acc & 0xF) return std::nullopt;
  bits = static_cast<uint32_t>(acc >> 4);
  return bits;
}

std::string crc32c_to_base64(uint32_t crc) {
  uint64_t acc = static_cast<uint64_t>(crc) << 4;
  std::string s(6, 'A');
  for (int i = 5; i >= 0; --i) {
    s[static_cast<size_t>(i)] = kB64[acc & 63];
    acc >>= 6;
  }
  return s + "==";
}

}  // namespace ft

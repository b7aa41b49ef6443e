#include "util/checksum.h"

// Inlined so XXH3 is compiled for this machine's vector width (-march); GCC 12 warns
// spuriously inside its AVX-512 intrinsics.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#define XXH_INLINE_ALL
#include <xxhash.h>
#pragma GCC diagnostic pop

#include <fmt/format.h>

#include "util/error.h"

namespace ft {
namespace {

uint64_t combine(const std::vector<uint64_t>& digests, uint64_t seed) {
  // Digests are hashed as little-endian u64s (the machines we target are little-endian).
  return XXH3_64bits_withSeed(digests.data(), digests.size() * sizeof(uint64_t), seed);
}

}  // namespace

uint64_t xxh3_64(const void* data, size_t bytes, uint64_t seed) {
  return XXH3_64bits_withSeed(data, bytes, seed);
}

ChunkedHasher::ChunkedHasher() : state_(XXH3_createState()) {
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_));
}

ChunkedHasher::~ChunkedHasher() {
  XXH3_freeState(static_cast<XXH3_state_t*>(state_));
}

void ChunkedHasher::update(const void* data, size_t bytes) {
  auto* st = static_cast<XXH3_state_t*>(state_);
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    size_t take = std::min(bytes, kChecksumChunk - in_chunk_);
    XXH3_64bits_update(st, p, take);
    in_chunk_ += take;
    p += take;
    bytes -= take;
    if (in_chunk_ == kChecksumChunk) {
      digests_.push_back(XXH3_64bits_digest(st));
      XXH3_64bits_reset(st);
      in_chunk_ = 0;
    }
  }
}

uint64_t ChunkedHasher::digest(uint64_t seed) {
  if (in_chunk_ > 0) digests_.push_back(XXH3_64bits_digest(static_cast<XXH3_state_t*>(state_)));
  in_chunk_ = 0;
  return combine(digests_, seed);
}

uint64_t chunked_hash(const void* data, size_t bytes, uint64_t seed) {
  const char* p = static_cast<const char*>(data);
  int64_t chunks = static_cast<int64_t>((bytes + kChecksumChunk - 1) / kChecksumChunk);
  std::vector<uint64_t> digests(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    size_t off = static_cast<size_t>(c) * kChecksumChunk;
    digests[static_cast<size_t>(c)] = XXH3_64bits(p + off, std::min(kChecksumChunk, bytes - off));
  }
  return combine(digests, seed);
}

std::string hex64(uint64_t v) {
  return fmt::format("{:016x}", v);
}

uint64_t parse_hex64(const std::string& s, const std::string& what) {
  if (s.size() != 16 || s.find_first_not_of("0123456789abcdef") != std::string::npos) {
    throw Error(fmt::format("{}: \"{}\" is not 16 lowercase hex digits", what, s.substr(0, 40)),
                "the manifest is damaged; re-run `fluxtrain prepare`");
  }
  return std::stoull(s, nullptr, 16);
}

}  // namespace ft

// Dataset checksums: XXH3-64 (Debian libxxhash) over 8 MiB chunks, then XXH3-64 of the chunk
// digests. The chunking lets one large shard be verified by several threads at memory speed
// (tens of GB/s), and a writer compute it while streaming. Documented in docs/formats.md.
//
//   ChunkedHasher h;  h.update(p, n); ...;  uint64_t c = h.digest(seed);
//   uint64_t same = chunked_hash(p, total_bytes, seed);   // OpenMP over chunks
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ft {

constexpr size_t kChecksumChunk = size_t{8} << 20;

// Plain XXH3-64 of a buffer (also used for the tokenizer model and header seeds).
uint64_t xxh3_64(const void* data, size_t bytes, uint64_t seed = 0);

class ChunkedHasher {
 public:
  ChunkedHasher();
  ~ChunkedHasher();
  ChunkedHasher(const ChunkedHasher&) = delete;
  ChunkedHasher& operator=(const ChunkedHasher&) = delete;
  void update(const void* data, size_t bytes);
  // Finishes the last chunk; call once. The seed only enters the final combination, so a
  // writer may learn it (e.g. a header's counts) after streaming the payload.
  uint64_t digest(uint64_t seed);

 private:
  void* state_;  // XXH3_state_t of the current chunk
  size_t in_chunk_ = 0;
  std::vector<uint64_t> digests_;
};

// Same value as ChunkedHasher over the whole buffer; chunks are hashed in parallel.
uint64_t chunked_hash(const void* data, size_t bytes, uint64_t seed);

// 16 lowercase hex digits, and back (throws ft::Error naming `what` on bad text).
std::string hex64(uint64_t v);
uint64_t parse_hex64(const std::string& s, const std::string& what);

}  // namespace ft

// Token shards (.ftshard): a 64-byte header, the tokens (uint16 or uint32), padding to 8 bytes,
// then num_docs + 1 uint64 document start offsets (in tokens; the last equals num_tokens).
// Layout, checksum and versioning are documented in docs/formats.md ("Dataset").
//
//   ShardWriter w(dir + "/train-00000.ftshard", /*token_bytes=*/2);
//   w.add_document(tokens.data(), tokens.size());   // a document's tokens, EOS included
//   ShardInfo info = w.commit();                    // tmp + fsync + rename
//
//   Shard s(path);            // mmap + header checks (magic, version, sizes, offsets)
//   s.verify();               // checksum; throws ft::Error naming the file on mismatch
//   uint32_t t = s.token(i);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "util/checksum.h"

namespace ft {

class AtomicFile;

constexpr char kShardMagic[8] = {'F', 'T', 'S', 'H', 'A', 'R', 'D', '\0'};
constexpr uint32_t kShardVersion = 1;
constexpr size_t kShardHeaderBytes = 64;

struct ShardHeader {  // on disk, little-endian, 64 bytes
  char magic[8];
  uint32_t version;
  uint32_t token_bytes;  // 2 or 4
  uint64_t num_tokens;
  uint64_t num_docs;
  uint64_t tokens_offset;     // = 64
  uint64_t doc_index_offset;  // = 64 + round_up(num_tokens * token_bytes, 8)
  uint64_t file_bytes;        // = doc_index_offset + (num_docs + 1) * 8
  uint64_t checksum;          // chunked XXH3 of bytes [64, file_bytes), seeded by bytes [0, 56)
};
static_assert(sizeof(ShardHeader) == kShardHeaderBytes);

struct ShardInfo {
  std::string file;  // name inside the dataset directory
  uint64_t tokens = 0, documents = 0, bytes = 0, checksum = 0;
  std::string language;     // of every document in the shard ("en", "ru", "other"); "" = not recorded
  uint64_t characters = 0;  // of the shard's documents' text (EOS excluded); 0 = not recorded
};

// A parsed, bounds-checked view of shard bytes in memory (the fuzzed entry point).
class ShardView {
 public:
  // Throws ft::Error("<name>: ...") on any inconsistency: short file, magic, version, dtype,
  // sizes that disagree with the header, document offsets out of order.
  ShardView(const uint8_t* data, size_t bytes, std::string name);

  const ShardHeader& header() const { return h_; }
  uint64_t num_tokens() const { return h_.num_tokens; }
  uint64_t num_docs() const { return h_.num_docs; }
  int token_bytes() const { return static_cast<int>(h_.token_bytes); }
  uint32_t token(uint64_t i) const {
    return h_.token_bytes == 2 ? reinterpret_cast<const uint16_t*>(tokens_)[i]
                               : reinterpret_cast<const uint32_t*>(tokens_)[i];
  }
  // Copies tokens [first, first + n) widened to int32.
  void copy_tokens(uint64_t first, uint64_t n, int32_t* out) const;
  uint64_t doc_offset(uint64_t d) const { return doc_index_[d]; }  // d in [0, num_docs]
  uint64_t compute_checksum() const;
  void verify() const;  // throws naming the shard when the checksum does not match
  const std::string& name() const { return name_; }

 private:
  ShardHeader h_{};
  const uint8_t* data_ = nullptr;
  const uint8_t* tokens_ = nullptr;
  const uint64_t* doc_index_ = nullptr;
  std::string name_;
};

// A shard file, memory-mapped read-only.
class Shard {
 public:
  explicit Shard(const std::string& path);
  ~Shard();
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;
  const ShardView& view() const { return *view_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  void* map_ = nullptr;
  size_t bytes_ = 0;
  std::unique_ptr<ShardView> view_;
};

// Streams one shard to disk with bounded memory (tokens go straight to the file; only the
// document offsets, 8 bytes per document, are held until commit).
class ShardWriter {
 public:
  ShardWriter(const std::string& path, int token_bytes);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;
  void add_document(const int32_t* tokens, size_t n);
  ShardInfo commit();
  uint64_t num_tokens() const { return num_tokens_; }

 private:
  void flush();
  std::unique_ptr<AtomicFile> file_;
  std::string path_;
  int token_bytes_;
  uint64_t num_tokens_ = 0;
  std::vector<uint64_t> doc_starts_{0};
  std::vector<uint8_t> buf_;
  ChunkedHasher hasher_;
};

// Header checksum seed: XXH3-64 of the header's first 56 bytes.
uint64_t shard_header_seed(const ShardHeader& h);

}  // namespace ft

// A rank file (step_<N>/rank-<r>.ftckpt): one rank's checkpoint state — a 64-byte header and a
// payload cut into fixed-size chunks, each encrypted with AES-256-GCM (followed by its 16-byte
// tag) when the checkpoint is encrypted, stored as is otherwise. What the payload holds is said
// by the manifest (ckpt/ckpt_manifest.h); the format is in docs/formats.md ("Checkpoint").
//
//   RankFileWriter w(dir + "/rank-00000.ftckpt", step, rank, payload_bytes, chunk_bytes, &key);
//   w.write(bytes, n); ...            // exactly payload_bytes in total, in order
//   uint64_t size = w.commit();       // fsync + rename; a destroyed uncommitted writer leaves
//   nothing
//
//   RankFileReader r(dir, manifest, file_index, &key);   // checks the header against the manifest
//   r.read(offset, n, dst);                              // decrypts and authenticates the chunks
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ckpt/ckpt_manifest.h"
#include "ckpt/crypto.h"
#include "util/fs.h"

namespace ft {

constexpr size_t kRankHeaderBytes = 64;

class RankFileWriter {
 public:
  // key == nullptr or empty: plaintext.
  RankFileWriter(const std::string& path, int64_t step, int rank, uint64_t payload_bytes, uint32_t chunk_bytes,
                 const CkptKey* key);
  ~RankFileWriter();
  void write(const void* data, size_t n);
  uint64_t commit();  // returns the file's size

 private:
  void flush_chunk();
  std::string path_, name_;
  AtomicFile file_;
  uint8_t header_[kRankHeaderBytes];
  uint64_t payload_, written_ = 0;
  uint32_t chunk_;
  uint64_t chunk_index_ = 0;
  std::unique_ptr<ChunkCipher> cipher_;
  uint8_t* plain_ = nullptr;  // encryption: the chunk being filled (kCheckpoint memory, wiped)
  uint8_t* sealed_ = nullptr;
  size_t fill_ = 0;
  int delay_ms_ = 0;  // FaultInjector::delays(): slow writes down (fault tests)
};

class RankFileReader {
 public:
  // Opens m.files[file] in dir and checks its header and size against the manifest; throws
  // ft::Error naming the file (truncated, swapped, another step, wrong key, ...).
  RankFileReader(const std::string& dir, const CheckpointManifest& m, int file, const CkptKey* key);
  ~RankFileReader();
  RankFileReader(const RankFileReader&) = delete;
  RankFileReader& operator=(const RankFileReader&) = delete;
  // Plaintext payload bytes [offset, offset + n) into dst; every chunk touched is authenticated.
  void read(uint64_t offset, uint64_t n, void* dst);
  // Reads every chunk (authenticating each when encrypted).
  void verify_chunks();
  const std::string& path() const { return path_; }

 private:
  void load_chunk(uint64_t k);
  std::string path_, name_;
  int fd_ = -1;
  uint8_t header_[kRankHeaderBytes];
  bool encrypted_;
  uint64_t payload_;
  uint32_t chunk_;
  std::unique_ptr<ChunkCipher> cipher_;
  uint8_t* buf_ = nullptr;     // the cached chunk's plaintext (kCheckpoint memory, wiped)
  uint8_t* sealed_ = nullptr;  // its bytes on disk
  uint64_t cached_ = UINT64_MAX;
};

}  // namespace ft

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
//
// A reader takes its bytes from a RankFileSource: a local file (pread, one chunk at a time), or an
// object in a bucket (bucket_storage.cpp: ranged GETs of the whole chunks a read covers, a span of
// them per request), so resharding from a bucket reads only the chunks a rank needs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

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

// Where a rank file's bytes are read from.
class RankFileSource {
 public:
  virtual ~RankFileSource() = default;
  virtual const std::string& path() const = 0;  // named in errors: a local path or a URL
  virtual uint64_t size() const = 0;
  // Bytes [offset, offset + n) into dst; throws ft::Error naming path().
  virtual void read(uint64_t offset, uint64_t n, void* dst) = 0;
  // Bytes a reader should fetch per request (whole chunks, at least one): 0 = one chunk at a time.
  virtual uint64_t span_bytes() const { return 0; }
  // Bytes fetched from where the file lives (retries included).
  virtual uint64_t bytes_fetched() const { return 0; }
};
std::unique_ptr<RankFileSource> open_local_rank_file(const std::string& path);
// A rank file of a checkpoint by its manifest record (null: the local file in the reader's dir).
using RankFileOpener = std::function<std::unique_ptr<RankFileSource>(const FileRecord&)>;

class RankFileReader {
 public:
  // Opens m.files[file] in dir and checks its header and size against the manifest; throws
  // ft::Error naming the file (truncated, swapped, another step, wrong key, ...).
  RankFileReader(const std::string& dir, const CheckpointManifest& m, int file, const CkptKey* key);
  RankFileReader(std::unique_ptr<RankFileSource> src, const CheckpointManifest& m, int file, const CkptKey* key);
  ~RankFileReader();
  RankFileReader(const RankFileReader&) = delete;
  RankFileReader& operator=(const RankFileReader&) = delete;
  // Plaintext payload bytes [offset, offset + n) into dst; every chunk touched is authenticated.
  void read(uint64_t offset, uint64_t n, void* dst);
  // Reads every chunk (authenticating each when encrypted).
  void verify_chunks();
  const std::string& path() const { return path_; }
  // Bytes the source fetched; stored bytes of the distinct chunks reads covered (what a reader
  // that fetches whole chunks needs at least: the needed ranges rounded out to chunks).
  uint64_t bytes_fetched() const { return src_->bytes_fetched(); }
  uint64_t chunk_bytes_needed() const { return needed_; }

 private:
  void load_chunk(uint64_t k, uint64_t last);  // last: the last chunk the current read needs
  void fetch_span(uint64_t k, uint64_t last);
  void release_span();
  uint64_t plain_bytes(uint64_t k) const;   // chunk k's payload bytes
  uint64_t stored_bytes(uint64_t k) const;  // and in the file (its tag included)
  std::unique_ptr<RankFileSource> src_;
  std::string path_, name_;
  uint8_t header_[kRankHeaderBytes];
  bool encrypted_;
  uint64_t payload_;
  uint32_t chunk_;
  std::unique_ptr<ChunkCipher> cipher_;
  uint8_t* buf_ = nullptr;   // the cached chunk's plaintext (kCheckpoint memory, wiped)
  uint8_t* span_ = nullptr;  // stored bytes of chunks [span_first_, span_end_) (kCheckpoint, wiped)
  uint64_t span_cap_ = 0, span_first_ = 0, span_end_ = 0;
  uint64_t cached_ = UINT64_MAX;
  std::vector<bool> touched_;  // chunks a read covered
  uint64_t needed_ = 0;
};

}  // namespace ft

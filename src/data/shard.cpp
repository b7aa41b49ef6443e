#include "data/shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "util/error.h"
#include "util/fs.h"

namespace ft {
namespace {

constexpr const char* kRegenerate = "the dataset is damaged: re-run `fluxtrain prepare` (or `fluxtrain data pull`)";

uint64_t round_up8(uint64_t x) {
  return (x + 7) & ~uint64_t{7};
}

}  // namespace

uint64_t shard_header_seed(const ShardHeader& h) {
  return xxh3_64(&h, offsetof(ShardHeader, checksum));
}

ShardView::ShardView(const uint8_t* data, size_t bytes, std::string name) : data_(data), name_(std::move(name)) {
  if (bytes < kShardHeaderBytes) {
    throw Error(
        fmt::format("{}: truncated shard: {} bytes, shorter than the {}-byte header", name_, bytes, kShardHeaderBytes),
        kRegenerate);
  }
  std::memcpy(&h_, data, sizeof h_);
  if (std::memcmp(h_.magic, kShardMagic, sizeof kShardMagic) != 0) {
    throw Error(fmt::format("{}: not a fluxtrain shard (bad magic)", name_), kRegenerate);
  }
  if (h_.version != kShardVersion) {
    throw Error(fmt::format("{}: shard format version {} is not supported (this build reads version {})", name_,
                            h_.version, kShardVersion),
                "re-run `fluxtrain prepare` with this build");
  }
  if (h_.token_bytes != 2 && h_.token_bytes != 4) {
    throw Error(fmt::format("{}: token width {} bytes (must be 2 or 4)", name_, h_.token_bytes), kRegenerate);
  }
  // Every size check is written so that no product or sum can overflow.
  const uint64_t max_tokens = (uint64_t{1} << 56) / h_.token_bytes;
  if (h_.num_tokens > max_tokens || h_.num_docs > h_.num_tokens || h_.tokens_offset != kShardHeaderBytes ||
      h_.doc_index_offset != kShardHeaderBytes + round_up8(h_.num_tokens * h_.token_bytes) ||
      h_.file_bytes != h_.doc_index_offset + (h_.num_docs + 1) * 8) {
    throw Error(fmt::format("{}: inconsistent header ({} tokens, {} documents, token data at {}, document index at "
                            "{}, {} bytes)",
                            name_, h_.num_tokens, h_.num_docs, h_.tokens_offset, h_.doc_index_offset, h_.file_bytes),
                kRegenerate);
  }
  if (h_.file_bytes != bytes) {
    throw Error(fmt::format("{}: {} shard: header says {} bytes, the file has {}", name_,
                            bytes < h_.file_bytes ? "truncated" : "oversized", h_.file_bytes, bytes),
                kRegenerate);
  }
  tokens_ = data + h_.tokens_offset;
  doc_index_ = reinterpret_cast<const uint64_t*>(data + h_.doc_index_offset);
  if (doc_index_[0] != 0 || doc_index_[h_.num_docs] != h_.num_tokens) {
    throw Error(fmt::format("{}: document index must run from 0 to {} tokens, runs from {} to {}", name_, h_.num_tokens,
                            doc_index_[0], doc_index_[h_.num_docs]),
                kRegenerate);
  }
  for (uint64_t d = 0; d < h_.num_docs; ++d) {
    if (doc_index_[d + 1] <= doc_index_[d]) {
      throw Error(fmt::format("{}: document {} is empty or out of order (offsets {} then {})", name_, d, doc_index_[d],
                              doc_index_[d + 1]),
                  kRegenerate);
    }
  }
}

void ShardView::copy_tokens(uint64_t first, uint64_t n, int32_t* out) const {
  FT_CHECK(first + n <= h_.num_tokens, "{}: tokens [{}, {}) out of range", name_, first, first + n);
  if (h_.token_bytes == 2) {
    const uint16_t* p = reinterpret_cast<const uint16_t*>(tokens_) + first;
    for (uint64_t i = 0; i < n; ++i) out[i] = p[i];
  } else {
    const uint32_t* p = reinterpret_cast<const uint32_t*>(tokens_) + first;
    for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(p[i]);
  }
}

uint64_t ShardView::compute_checksum() const {
  return chunked_hash(data_ + kShardHeaderBytes, h_.file_bytes - kShardHeaderBytes, shard_header_seed(h_));
}

void ShardView::verify() const {
  uint64_t got = compute_checksum();
  if (got != h_.checksum) {
    throw Error(fmt::format("{}: checksum mismatch: header records {}, the data hashes to {}", name_,
                            hex64(h_.checksum), hex64(got)),
                kRegenerate);
  }
}

Shard::Shard(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    // A missing shard is a damaged dataset; one that is there but cannot be opened (permissions,
    // an I/O error) is not, and preparing it again would not help.
    if (err == ENOENT) throw Error(fmt::format("{}: {}", path, std::strerror(err)), kRegenerate);
    throw Error(fmt::format("{}: the shard cannot be read: {}", path, std::strerror(err)),
                err == EACCES || err == EPERM
                    ? fmt::format("give the user running fluxtrain read permission on it (`ls -l {}`)", path)
                    : "check the file system that holds it (its kernel log, its mount)");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(fmt::format("{}: not a regular file", path), kRegenerate);
  }
  bytes_ = static_cast<size_t>(st.st_size);
  if (bytes_ > 0) {
    map_ = ::mmap(nullptr, bytes_, PROT_READ, MAP_SHARED, fd, 0);
    if (map_ == MAP_FAILED) {
      map_ = nullptr;
      int err = errno;
      ::close(fd);
      throw Error(fmt::format("{}: mmap failed: {}", path, std::strerror(err)));
    }
  }
  ::close(fd);
  static const uint8_t kEmpty[1] = {0};
  view_ = std::make_unique<ShardView>(map_ ? static_cast<const uint8_t*>(map_) : kEmpty, bytes_, path);
}

Shard::~Shard() {
  if (map_) ::munmap(map_, bytes_);
}

ShardWriter::ShardWriter(const std::string& path, int token_bytes)
    : file_(std::make_unique<AtomicFile>(path)), path_(path), token_bytes_(token_bytes) {
  FT_CHECK(token_bytes == 2 || token_bytes == 4, "token_bytes {}", token_bytes);
  ShardHeader placeholder{};
  file_->write(&placeholder, sizeof placeholder);
  buf_.reserve(size_t{1} << 20);
}

ShardWriter::~ShardWriter() = default;

void ShardWriter::flush() {
  if (buf_.empty()) return;
  hasher_.update(buf_.data(), buf_.size());
  file_->write(buf_.data(), buf_.size());
  buf_.clear();
}

void ShardWriter::add_document(const int32_t* tokens, size_t n) {
  FT_CHECK(n > 0, "empty document in {}", path_);
  for (size_t i = 0; i < n; ++i) {
    uint32_t t = static_cast<uint32_t>(tokens[i]);
    FT_CHECK(token_bytes_ == 4 || t < 65536, "token {} does not fit uint16 in {}", t, path_);
    uint8_t b[4];
    std::memcpy(b, &t, 4);  // little-endian
    buf_.insert(buf_.end(), b, b + token_bytes_);
  }
  num_tokens_ += n;
  doc_starts_.push_back(num_tokens_);
  if (buf_.size() >= (size_t{1} << 20)) flush();
}

ShardInfo ShardWriter::commit() {
  uint64_t token_bytes = num_tokens_ * static_cast<uint64_t>(token_bytes_);
  buf_.resize(buf_.size() + (round_up8(token_bytes) - token_bytes), 0);
  flush();
  hasher_.update(doc_starts_.data(), doc_starts_.size() * sizeof(uint64_t));
  file_->write(doc_starts_.data(), doc_starts_.size() * sizeof(uint64_t));
  ShardHeader h{};
  std::memcpy(h.magic, kShardMagic, sizeof kShardMagic);
  h.version = kShardVersion;
  h.token_bytes = static_cast<uint32_t>(token_bytes_);
  h.num_tokens = num_tokens_;
  h.num_docs = doc_starts_.size() - 1;
  h.tokens_offset = kShardHeaderBytes;
  h.doc_index_offset = kShardHeaderBytes + round_up8(token_bytes);
  h.file_bytes = h.doc_index_offset + doc_starts_.size() * 8;
  h.checksum = hasher_.digest(shard_header_seed(h));
  FT_CHECK(h.file_bytes == file_->bytes_written(), "{}: wrote {} bytes, header says {}", path_, file_->bytes_written(),
           h.file_bytes);
  file_->write_at(0, &h, sizeof h);
  file_->commit();
  ShardInfo info;
  info.file = std::filesystem::path(path_).filename().string();
  info.tokens = h.num_tokens;
  info.documents = h.num_docs;
  info.bytes = h.file_bytes;
  info.checksum = h.checksum;
  return info;
}

}  // namespace ft

#include "ckpt/rank_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "fault/inject.h"
#include "tensor/memory.h"
#include "util/checksum.h"
#include "util/error.h"

namespace ft {
namespace {

constexpr char kMagic[8] = {'F', 'T', 'C', 'K', 'P', 'T', '\0', '\0'};
constexpr uint32_t kVersion = 1;
constexpr const char* kHint = "the checkpoint is damaged; resume from an older one (--resume auto skips it)";

template <typename T>
void put(uint8_t* h, size_t at, T v) {
  std::memcpy(h + at, &v, sizeof v);
}
template <typename T>
T get(const uint8_t* h, size_t at) {
  T v;
  std::memcpy(&v, h + at, sizeof v);
  return v;
}

uint64_t n_chunks(uint64_t payload, uint32_t chunk) {
  return (payload + chunk - 1) / chunk;
}

uint64_t file_size_of(uint64_t payload, uint32_t chunk, bool encrypted) {
  return kRankHeaderBytes + payload + (encrypted ? n_chunks(payload, chunk) * kGcmTagBytes : 0);
}

// Associated data of chunk k: the whole header (step, rank, sizes, nonce, key id), the file's
// name and the chunk index.
std::string chunk_aad(const uint8_t* header, const std::string& name, uint64_t k) {
  std::string aad(reinterpret_cast<const char*>(header), kRankHeaderBytes);
  aad += name;
  aad.append(reinterpret_cast<const char*>(&k), 8);
  return aad;
}

void chunk_nonce(const uint8_t* header, uint64_t k, uint8_t nonce[kGcmNonceBytes]) {
  std::memcpy(nonce, header + 40, 8);  // the file's random prefix
  uint32_t idx = static_cast<uint32_t>(k);
  std::memcpy(nonce + 8, &idx, 4);
}

void key_id_bytes(const CkptKey& key, uint8_t out[8]) {
  std::string id = key.id();
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<uint8_t>(std::stoi(id.substr(static_cast<size_t>(2 * i), 2), nullptr, 16));
}

}  // namespace

RankFileWriter::RankFileWriter(const std::string& path, int64_t step, int rank, uint64_t payload_bytes,
                               uint32_t chunk_bytes, const CkptKey* key)
    : path_(path),
      name_(std::filesystem::path(path).filename().string()),
      file_(path),
      payload_(payload_bytes),
      chunk_(chunk_bytes) {
  const bool enc = key && !key->empty();
  std::memset(header_, 0, sizeof header_);
  std::memcpy(header_, kMagic, 8);
  put<uint32_t>(header_, 8, kVersion);
  put<uint32_t>(header_, 12, enc ? 1u : 0u);
  put<uint64_t>(header_, 16, static_cast<uint64_t>(step));
  put<uint32_t>(header_, 24, static_cast<uint32_t>(rank));
  put<uint32_t>(header_, 28, chunk_bytes);
  put<uint64_t>(header_, 32, payload_bytes);
  if (enc) {
    FT_CHECK(n_chunks(payload_bytes, chunk_bytes) < (uint64_t{1} << 32), "too many chunks for 32-bit nonce counters");
    random_bytes(header_ + 40, 8);
    key_id_bytes(*key, header_ + 48);
    cipher_ = std::make_unique<ChunkCipher>(*key);
    plain_ = static_cast<uint8_t*>(mem_alloc(Device::kCPU, chunk_, MemCategory::kCheckpoint));
    sealed_ = static_cast<uint8_t*>(mem_alloc(Device::kCPU, chunk_ + kGcmTagBytes, MemCategory::kCheckpoint));
  }
  put<uint64_t>(header_, 56, xxh3_64(header_, 56));
  file_.write(header_, kRankHeaderBytes);
  delay_ms_ = FaultInjector::delays().ckpt_write_ms;
}

RankFileWriter::~RankFileWriter() {
  if (plain_) mem_free(Device::kCPU, plain_, chunk_, MemCategory::kCheckpoint);  // wiped
  if (sealed_) mem_free(Device::kCPU, sealed_, chunk_ + kGcmTagBytes, MemCategory::kCheckpoint);
}

void RankFileWriter::flush_chunk() {
  if (fill_ == 0) return;
  uint8_t nonce[kGcmNonceBytes];
  chunk_nonce(header_, chunk_index_, nonce);
  std::string aad = chunk_aad(header_, name_, chunk_index_);
  cipher_->seal(sealed_, sealed_ + fill_, plain_, fill_, nonce, reinterpret_cast<const uint8_t*>(aad.data()),
                aad.size());
  secure_zero(plain_, fill_);
  file_.write(sealed_, fill_ + kGcmTagBytes);
  ++chunk_index_;
  fill_ = 0;
  if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
}

void RankFileWriter::write(const void* data, size_t n) {
  FT_CHECK(written_ + n <= payload_, "{}: more payload than announced", path_);
  const uint8_t* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    size_t room = chunk_ - (written_ % chunk_);
    size_t take = std::min(n, room);
    if (cipher_) {
      std::memcpy(plain_ + fill_, p, take);
      fill_ += take;
      if (fill_ == chunk_) flush_chunk();
    } else {
      file_.write(p, take);
      if (take == room && delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
    }
    written_ += take;
    p += take;
    n -= take;
  }
}

uint64_t RankFileWriter::commit() {
  FT_CHECK(written_ == payload_, "{}: {} payload bytes written of {}", path_, written_, payload_);
  if (cipher_) flush_chunk();
  uint64_t size = file_.bytes_written();
  file_.commit();
  return size;
}

namespace {

// A local file, read with pread.
class LocalRankFile final : public RankFileSource {
 public:
  explicit LocalRankFile(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw Error(fmt::format("{}: cannot open: {}", path_, std::strerror(errno)), kHint);
    struct stat st {};
    ::fstat(fd_, &st);
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~LocalRankFile() override { ::close(fd_); }
  const std::string& path() const override { return path_; }
  uint64_t size() const override { return size_; }
  void read(uint64_t offset, uint64_t n, void* dst) override {
    uint8_t* out = static_cast<uint8_t*>(dst);
    uint64_t got = 0;
    while (got < n) {
      ssize_t r = ::pread(fd_, out + got, n - got, static_cast<off_t>(offset + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0)
        throw Error(fmt::format("{}: reading bytes [{}, {}): {}", path_, offset, offset + n,
                                r < 0 ? std::strerror(errno) : "unexpected end of file"),
                    kHint);
      got += static_cast<uint64_t>(r);
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace

std::unique_ptr<RankFileSource> open_local_rank_file(const std::string& path) {
  return std::make_unique<LocalRankFile>(path);
}

RankFileReader::RankFileReader(const std::string& dir, const CheckpointManifest& m, int file, const CkptKey* key)
    : RankFileReader(open_local_rank_file(dir + "/" + m.files.at(static_cast<size_t>(file)).name), m, file, key) {}

RankFileReader::RankFileReader(std::unique_ptr<RankFileSource> src, const CheckpointManifest& m, int file,
                               const CkptKey* key)
    : src_(std::move(src)) {
  const FileRecord& rec = m.files.at(static_cast<size_t>(file));
  path_ = src_->path();
  name_ = rec.name;
  encrypted_ = m.encrypted;
  auto bad = [&](const std::string& what) { return Error(fmt::format("{}: {}", path_, what), kHint); };
  const uint64_t size = src_->size();
  if (size < kRankHeaderBytes)
    throw bad(fmt::format("truncated: {} bytes is shorter than the {}-byte header", size, kRankHeaderBytes));
  src_->read(0, kRankHeaderBytes, header_);
  if (std::memcmp(header_, kMagic, 8) != 0) throw bad("not a fluxtrain checkpoint file (bad magic)");
  if (get<uint32_t>(header_, 8) != kVersion)
    throw bad(fmt::format("rank file version {} is not supported (this build reads {})", get<uint32_t>(header_, 8),
                          kVersion));
  if (get<uint64_t>(header_, 56) != xxh3_64(header_, 56))
    throw bad("the header's checksum does not match: it was modified");
  const bool enc = get<uint32_t>(header_, 12) & 1u;
  if (enc != m.encrypted)
    throw bad(fmt::format("the file is {} but the manifest says the checkpoint is {}", enc ? "encrypted" : "plaintext",
                          m.encrypted ? "encrypted" : "plaintext"));
  if (get<uint64_t>(header_, 16) != static_cast<uint64_t>(m.step))
    throw bad(fmt::format("holds step {}, the manifest is of step {} (a file from another checkpoint?)",
                          get<uint64_t>(header_, 16), m.step));
  if (get<uint32_t>(header_, 24) != static_cast<uint32_t>(rec.rank))
    throw bad(fmt::format("holds rank {}'s state, the manifest expects rank {} (files swapped?)",
                          get<uint32_t>(header_, 24), rec.rank));
  payload_ = get<uint64_t>(header_, 32);
  chunk_ = get<uint32_t>(header_, 28);
  if (payload_ != rec.payload_bytes || chunk_ != m.chunk_bytes || chunk_ == 0)
    throw bad(fmt::format("header says {} payload bytes in {}-byte chunks, the manifest {} in {}", payload_, chunk_,
                          rec.payload_bytes, m.chunk_bytes));
  const uint64_t want = file_size_of(payload_, chunk_, enc);
  if (size != want || size != rec.file_bytes)
    throw bad(fmt::format("truncated or extended: the file has {} bytes, its header says {} (manifest: {})", size, want,
                          rec.file_bytes));
  if (enc) {
    if (!key || key->empty())
      throw Error(fmt::format("{}: the checkpoint is encrypted and no key was given", path_),
                  "set FLUXTRAIN_CKPT_KEY or ckpt.key_file (--key-file) to the key it was written with");
    uint8_t id[8];
    key_id_bytes(*key, id);
    if (std::memcmp(id, header_ + 48, 8) != 0)
      throw Error(fmt::format("{}: encrypted with another key (key id {:02x}{:02x}{:02x}{:02x}..., "
                              "the given key has {})",
                              path_, header_[48], header_[49], header_[50], header_[51], key->id()),
                  "use the key the checkpoint was written with");
    cipher_ = std::make_unique<ChunkCipher>(*key);
  }
  buf_ = static_cast<uint8_t*>(mem_alloc(Device::kCPU, chunk_, MemCategory::kCheckpoint));
  touched_.assign(n_chunks(payload_, chunk_), false);
  needed_ = kRankHeaderBytes;  // read above
}

RankFileReader::~RankFileReader() {
  if (buf_) mem_free(Device::kCPU, buf_, chunk_, MemCategory::kCheckpoint);
  if (span_) mem_free(Device::kCPU, span_, span_cap_, MemCategory::kCheckpoint);
}

uint64_t RankFileReader::plain_bytes(uint64_t k) const {
  return std::min<uint64_t>(chunk_, payload_ - k * chunk_);
}

uint64_t RankFileReader::stored_bytes(uint64_t k) const {
  return plain_bytes(k) + (encrypted_ ? kGcmTagBytes : 0);
}

void RankFileReader::fetch_span(uint64_t k, uint64_t last) {
  // Whole chunks k .. at most `last`, as many as the source's span holds (one at least): one request.
  const uint64_t stride = chunk_ + (encrypted_ ? kGcmTagBytes : 0);
  const uint64_t fit = std::max<uint64_t>(1, src_->span_bytes() / stride);
  const uint64_t end = std::min({last + 1, k + fit, n_chunks(payload_, chunk_)});
  const uint64_t bytes = (end - 1 - k) * stride + stored_bytes(end - 1);
  if (bytes > span_cap_) {
    if (span_) mem_free(Device::kCPU, span_, span_cap_, MemCategory::kCheckpoint);
    span_ = nullptr;
    span_first_ = span_end_ = 0;
    span_cap_ = std::max(bytes, stride);
    span_ = static_cast<uint8_t*>(mem_alloc(Device::kCPU, span_cap_, MemCategory::kCheckpoint));
  }
  span_first_ = span_end_ = 0;
  src_->read(kRankHeaderBytes + k * stride, bytes, span_);
  span_first_ = k;
  span_end_ = end;
}

void RankFileReader::load_chunk(uint64_t k, uint64_t last) {
  if (cached_ == k) return;
  cached_ = UINT64_MAX;
  if (!touched_[k]) {
    touched_[k] = true;
    needed_ += stored_bytes(k);
  }
  if (k < span_first_ || k >= span_end_) fetch_span(k, last);
  const uint64_t n = plain_bytes(k);
  const uint8_t* stored = span_ + (k - span_first_) * (chunk_ + (encrypted_ ? kGcmTagBytes : 0));
  if (encrypted_) {
    uint8_t nonce[kGcmNonceBytes];
    chunk_nonce(header_, k, nonce);
    std::string aad = chunk_aad(header_, name_, k);
    if (!cipher_->open(buf_, stored, n, stored + n, nonce, reinterpret_cast<const uint8_t*>(aad.data()), aad.size()))
      throw Error(fmt::format("{}: chunk {} does not authenticate (AES-256-GCM tag mismatch): the "
                              "file was modified, "
                              "truncated, swapped or renamed",
                              path_, k),
                  kHint);
  } else {
    std::memcpy(buf_, stored, n);
  }
  cached_ = k;
}

void RankFileReader::read(uint64_t offset, uint64_t n, void* dst) {
  FT_CHECK(offset <= payload_ && n <= payload_ - offset, "{}: read past the payload", path_);
  if (n == 0) return;
  uint8_t* out = static_cast<uint8_t*>(dst);
  const uint64_t last = (offset + n - 1) / chunk_;
  while (n > 0) {
    uint64_t k = offset / chunk_, in = offset % chunk_;
    load_chunk(k, last);
    uint64_t take = std::min<uint64_t>(n, plain_bytes(k) - in);
    std::memcpy(out, buf_ + in, take);
    out += take;
    offset += take;
    n -= take;
  }
  release_span();  // what it held is read (its last chunk stays decrypted in buf_)
}

void RankFileReader::release_span() {
  // A one-chunk buffer (a local file's) is kept; a wide span (a bucket's) is not held between reads:
  // a reader per rank file stays open for the whole resume.
  if (span_cap_ <= chunk_ + kGcmTagBytes) return;
  mem_free(Device::kCPU, span_, span_cap_, MemCategory::kCheckpoint);
  span_ = nullptr;
  span_cap_ = span_first_ = span_end_ = 0;
}

void RankFileReader::verify_chunks() {
  const uint64_t n = n_chunks(payload_, chunk_);
  for (uint64_t k = 0; k < n; ++k) load_chunk(k, n - 1);
  release_span();
}

}  // namespace ft

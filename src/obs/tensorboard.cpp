#include "obs/tensorboard.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "util/error.h"
#include "util/log.h"

namespace ft::obs {
namespace {

constexpr std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;  // reflected Castagnoli
    t[i] = c;
  }
  return t;
}
constexpr auto kCrcTable = make_crc_table();

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Protobuf wire format: tag = field << 3 | wire type (0 varint, 1 fixed64, 2 length-delimited, 5 fixed32).
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
void put_fixed(std::string& out, const void* p, size_t n) {  // little-endian host (x86, arm64)
  out.append(static_cast<const char*>(p), n);
}
void put_key(std::string& out, int field, int wire) {
  put_varint(out, static_cast<uint64_t>(field) << 3 | wire);
}

}  // namespace

uint32_t crc32c(const void* data, size_t n, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = kCrcTable[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t masked_crc32c(const void* data, size_t n) {
  uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

void encode_scalar_event(std::string& out, double wall_time, int64_t step, std::string_view tag, float value) {
  // Sizes first, so nothing is built in temporaries (no allocation once `out` has capacity).
  auto varint_len = [](uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
      v >>= 7;
      ++n;
    }
    return n;
  };
  const size_t value_len = 1 + varint_len(tag.size()) + tag.size() + 1 + 4;
  const size_t summary_len = 1 + varint_len(value_len) + value_len;
  // Event { double wall_time = 1; int64 step = 2; Summary summary = 5; }
  put_key(out, 1, 1);
  put_fixed(out, &wall_time, 8);
  put_key(out, 2, 0);
  put_varint(out, static_cast<uint64_t>(step));
  put_key(out, 5, 2);
  put_varint(out, summary_len);
  // Summary { repeated Value value = 1; }
  put_key(out, 1, 2);
  put_varint(out, value_len);
  // Summary.Value { string tag = 1; float simple_value = 2; }
  put_key(out, 1, 2);
  put_varint(out, tag.size());
  out.append(tag);
  put_key(out, 2, 5);
  put_fixed(out, &value, 4);
}

void frame_record(std::string& out, std::string_view payload) {
  uint64_t len = payload.size();
  uint32_t len_crc = masked_crc32c(&len, 8);
  uint32_t data_crc = masked_crc32c(payload.data(), payload.size());
  put_fixed(out, &len, 8);
  put_fixed(out, &len_crc, 4);
  out.append(payload);
  put_fixed(out, &data_crc, 4);
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw Error(fmt::format("cannot create TensorBoard directory {}: {}", dir, ec.message()),
                "check train.run_dir, or set metrics.tensorboard = false");
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  double t = now_seconds();
  path_ = fmt::format("{}/events.out.tfevents.{}.{}.{}", dir, static_cast<int64_t>(t), host, ::getpid());
  f_ = std::fopen(path_.c_str(), "ab");
  if (!f_)
    throw Error(fmt::format("cannot create {}: {}", path_, std::strerror(errno)),
                "check train.run_dir, or set metrics.tensorboard = false");
  // First record: Event { double wall_time = 1; string file_version = 3; }
  event_.clear();
  put_key(event_, 1, 1);
  put_fixed(event_, &t, 8);
  const std::string_view version = "brain.Event:2";
  put_key(event_, 3, 2);
  put_varint(event_, version.size());
  event_.append(version);
  write_record(event_);
  flush();
}

TensorBoardWriter::~TensorBoardWriter() {
  if (f_) {
    flush();
    std::fclose(f_);
  }
}

void TensorBoardWriter::write_record(std::string_view payload) {
  if (failed_) return;
  record_.clear();
  frame_record(record_, payload);
  if (std::fwrite(record_.data(), 1, record_.size(), f_) != record_.size()) {
    failed_ = true;  // a full disk must not stop training: metrics.jsonl is the canonical log
    log_warn("TensorBoard: writing {} failed ({}); no more TensorBoard events this run", path_, std::strerror(errno));
  }
}

void TensorBoardWriter::add_scalar(std::string_view tag, int64_t step, float value) {
  double t = now_seconds();
  event_.clear();
  encode_scalar_event(event_, t, step, tag, value);
  write_record(event_);
  if (t - last_flush_ > 5.0) flush();
}

void TensorBoardWriter::flush() {
  if (f_ && !failed_) std::fflush(f_);
  last_flush_ = now_seconds();
}

}  // namespace ft::obs

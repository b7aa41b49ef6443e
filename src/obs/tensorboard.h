// TensorBoard scalar event files, written without TensorFlow or protobuf: each record is
// TFRecord-framed (length, masked CRC-32C of the length, payload, masked CRC-32C of the
// payload) and the payload is a hand-encoded tensorflow.Event protobuf holding one
// Summary.Value{tag, simple_value}. metrics.jsonl stays the canonical log; this is a view.
//
//   obs::TensorBoardWriter tb("runs/r1/tb");      // creates the directory and one event file
//   tb.add_scalar("train/loss", 12, 3.21f);
//   tb.flush();                                   // also every few seconds and on destruction
//
// The file is appended to; a crash can leave a truncated last record, which TensorBoard's
// reader skips. A new process writes a new file (TensorBoard merges a directory's files).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace ft::obs {

// CRC-32C (Castagnoli), and TFRecord's masked form of it.
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);
uint32_t masked_crc32c(const void* data, size_t n);

// Appends the protobuf encoding of a tensorflow.Event with one scalar to out.
void encode_scalar_event(std::string& out, double wall_time, int64_t step, std::string_view tag, float value);
// Appends one TFRecord frame around payload.
void frame_record(std::string& out, std::string_view payload);

class TensorBoardWriter {
 public:
  explicit TensorBoardWriter(const std::string& dir);  // throws ft::Error naming the directory
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  void add_scalar(std::string_view tag, int64_t step, float value);
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write_record(std::string_view payload);
  std::string path_;
  std::FILE* f_ = nullptr;
  std::string event_, record_;  // reused buffers: no allocation per scalar after warm-up
  double last_flush_ = 0;
  bool failed_ = false;
};

}  // namespace ft::obs

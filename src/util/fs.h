// Files written atomically: bytes go to "<path>.tmp.<pid>", are fsync'ed, then renamed over
// <path> and the directory is fsync'ed. A crash leaves either the old file or the new one,
// never a half-written file under the final name.
//
//   ft::AtomicFile f(path);        // opens the temporary
//   f.write(data, n);              // as often as needed
//   f.commit();                    // fsync + rename; the destructor discards if not committed
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ft {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes);
  void write(std::string_view s) { write(s.data(), s.size()); }
  // Overwrites bytes already written (e.g. a header patched once the payload is known).
  void write_at(uint64_t offset, const void* data, size_t bytes);
  uint64_t bytes_written() const { return written_; }
  void commit();
  const std::string& path() const { return path_; }

 private:
  std::string path_, tmp_;
  int fd_ = -1;
  uint64_t written_ = 0;
  bool committed_ = false;
};

void write_file_atomic(const std::string& path, std::string_view contents);
std::string read_file(const std::string& path);  // throws ft::Error naming the file
void fsync_dir(const std::string& dir);

}  // namespace ft

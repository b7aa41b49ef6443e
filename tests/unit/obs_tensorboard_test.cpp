// TFRecord framing and CRC-32C; that TensorBoard itself reads our files is checked by
// tests/obs/tensorboard_read.py (CTest obs_tensorboard_read).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "obs/tensorboard.h"
#include "util/fs.h"

namespace ft::obs {
namespace {

TEST(Crc32c, KnownVectors) {
  // The CRC-32C check value, and the iSCSI test vectors of RFC 3720 (B.4).
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  uint8_t buf[32];
  std::memset(buf, 0, 32);
  EXPECT_EQ(crc32c(buf, 32), 0x8A9136AAu);
  std::memset(buf, 0xff, 32);
  EXPECT_EQ(crc32c(buf, 32), 0x62A8AB43u);
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(crc32c(buf, 32), 0x46DD794Eu);
  // Incremental use gives the same result.
  EXPECT_EQ(crc32c(buf + 5, 27, crc32c(buf, 5)), 0x46DD794Eu);
}

TEST(TensorBoard, RecordsAreFramedAndChecksummed) {
  auto dir = std::filesystem::temp_directory_path() / ("ft_tb_" + std::to_string(::getpid()));
  std::string path;
  {
    TensorBoardWriter w(dir.string());
    w.add_scalar("train/loss", 5, 2.5f);
    path = w.path();
  }
  EXPECT_NE(path.find("events.out.tfevents."), std::string::npos);
  std::string bytes = read_file(path);
  // Walk the records: [len u64][masked crc of len][payload][masked crc of payload].
  size_t off = 0;
  int n = 0;
  while (off < bytes.size()) {
    ASSERT_LE(off + 12, bytes.size());
    uint64_t len;
    uint32_t lc, dc;
    std::memcpy(&len, bytes.data() + off, 8);
    std::memcpy(&lc, bytes.data() + off + 8, 4);
    EXPECT_EQ(lc, masked_crc32c(bytes.data() + off, 8));
    ASSERT_LE(off + 12 + len + 4, bytes.size());
    std::memcpy(&dc, bytes.data() + off + 12 + len, 4);
    EXPECT_EQ(dc, masked_crc32c(bytes.data() + off + 12, len));
    if (n == 1) {
      EXPECT_NE(bytes.substr(off + 12, len).find("train/loss"), std::string::npos);
    }
    off += 12 + len + 4;
    ++n;
  }
  EXPECT_EQ(n, 2);  // file_version event + one scalar
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ft::obs

// GcsClient's writing half against a real GCS emulator. tests/objstore/test_gcs_upload.py starts
// fake-gcs-server and the front before it (servers.Front: the resumable sessions' committed
// offsets, the final CRC32C check, cut and damaged chunks for objects under "dropped/" and
// "damaged/") and runs this binary with FT_TEST_GCS_ENDPOINT (the front) and FT_TEST_GCS_BUCKET
// set; without them (a plain `ctest -L unit`) every test is skipped. What the front saw (bytes
// per object, cancelled sessions) is checked there.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>

#include "data/objstore/crc32c.h"
#include "data/objstore/gcs.h"
#include "upload_test_files.h"
#include "util/error.h"

namespace ft {
namespace {

constexpr uint64_t kKiB = 1024;

class GcsUpload : public ::testing::Test {
 protected:
  void SetUp() override {
    endpoint_ = upload_test::env_or_empty("FT_TEST_GCS_ENDPOINT");
    bucket_ = upload_test::env_or_empty("FT_TEST_GCS_BUCKET");
    if (endpoint_.empty() || bucket_.empty())
      GTEST_SKIP() << "no GCS server (run by tests/objstore/test_gcs_upload.py)";
  }
  GcsClient client() {
    ObjectStoreOptions o;
    o.gcs_endpoint = endpoint_;
    o.gcs_write = true;
    o.backoff_s = 0.01;
    return GcsClient(o);
  }
  static std::string file_of(size_t n, uint32_t seed) { return upload_test::random_file("gcs_upload", n, seed); }
  static std::string read(const std::string& path) { return upload_test::read_all(path); }
  std::string endpoint_, bucket_;
};

TEST_F(GcsUpload, PutStatGetRemove) {
  GcsClient gcs = client();
  UploadReport r = gcs.put(bucket_, "small/a b.txt", "hello, store");
  EXPECT_EQ(r.bytes, 12u);
  EXPECT_EQ(r.parts, 1);
  EXPECT_EQ(r.etag, crc32c_to_base64(crc32c("hello, store", 12)));
  StoreObject o = gcs.stat(bucket_, "small/a b.txt");
  EXPECT_EQ(o.size, 12u);
  ASSERT_TRUE(o.crc32c.has_value());
  EXPECT_EQ(*o.crc32c, crc32c("hello, store", 12));
  EXPECT_EQ(gcs.get(bucket_, "small/a b.txt"), "hello, store");
  gcs.put(bucket_, "small/empty", "");
  EXPECT_EQ(gcs.stat(bucket_, "small/empty").size, 0u);
  gcs.copy(bucket_, "small/a b.txt", "small/copy");
  EXPECT_EQ(gcs.get(bucket_, "small/copy"), "hello, store");
  gcs.remove(bucket_, "small/a b.txt");
  EXPECT_THROW(gcs.stat(bucket_, "small/a b.txt"), Error);
  gcs.remove(bucket_, "small/a b.txt");  // deleting what is gone is not an error
}

TEST_F(GcsUpload, ChunkedRoundTrip) {
  GcsClient gcs = client();
  const uint64_t size = 1024 * kKiB + 123;
  const std::string path = file_of(size, 1);
  std::vector<uint64_t> starts;
  gcs.on_chunk = [&](uint64_t off, int) { starts.push_back(off); };
  // 300 KiB asked: chunks are whole multiples of 256 KiB, so 256 KiB each, five of them.
  UploadReport r = gcs.upload_file(bucket_, "big/chunks.bin", path, UploadOptions{300 * kKiB, 1});
  EXPECT_EQ(r.parts, 5);
  EXPECT_EQ(r.bytes, size);
  EXPECT_EQ(r.sent, size);
  EXPECT_EQ(starts, (std::vector<uint64_t>{0, 256 * kKiB, 512 * kKiB, 768 * kKiB, 1024 * kKiB}));
  EXPECT_EQ(gcs.get(bucket_, "big/chunks.bin"), read(path));
  EXPECT_EQ(r.etag, crc32c_to_base64(crc32c_file(path)));
}

TEST_F(GcsUpload, DroppedChunkResumesTheSession) {
  // The front cuts the first two chunks of objects under "dropped/", after passing on the first
  // half of each (the server keeps it): the client asks the session's committed offset and sends
  // from there, so only what the server did not keep goes twice.
  GcsClient gcs = client();
  const uint64_t size = 2048 * kKiB + 5;
  const std::string path = file_of(size, 2);
  std::vector<uint64_t> starts;
  gcs.on_chunk = [&](uint64_t off, int) { starts.push_back(off); };
  UploadReport r = gcs.upload_file(bucket_, "dropped/multi.bin", path, UploadOptions{1024 * kKiB, 1});
  EXPECT_EQ(gcs.get(bucket_, "dropped/multi.bin"), read(path));
  // [0, 1 MiB) cut with 512 KiB kept -> [512 KiB, 1.5 MiB) cut with 512 KiB kept -> [1 MiB, 2 MiB)
  // -> the last 5 bytes.
  EXPECT_EQ(starts, (std::vector<uint64_t>{0, 512 * kKiB, 1024 * kKiB, 2048 * kKiB}));
  EXPECT_EQ(r.sent, size + 2 * 512 * kKiB);
  EXPECT_LE(r.sent, 2 * size);
}

TEST_F(GcsUpload, DamagedChunkIsRefusedAndNothingIsStored) {
  GcsClient gcs = client();
  const std::string path = file_of(600 * kKiB, 3);
  try {
    gcs.upload_file(bucket_, "damaged/x.bin", path, UploadOptions{256 * kKiB, 1});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CRC32C"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("gs://" + bucket_ + "/damaged/x.bin"), std::string::npos) << e.what();
  }
  EXPECT_THROW(gcs.stat(bucket_, "damaged/x.bin"), Error);
}

TEST_F(GcsUpload, FailedChunkCancelsTheSession) {
  GcsClient gcs = client();
  const std::string path = file_of(600 * kKiB, 4);
  gcs.on_chunk = [](uint64_t off, int) {
    if (off > 0) throw Error("injected: the second chunk fails");
  };
  EXPECT_THROW(gcs.upload_file(bucket_, "cancelled/x.bin", path, UploadOptions{256 * kKiB, 1}), Error);
  EXPECT_THROW(gcs.stat(bucket_, "cancelled/x.bin"), Error);  // nothing finished
  // (test_gcs_upload.py checks that the session was cancelled)
}

TEST_F(GcsUpload, MissingBucketIsOneClearError) {
  GcsClient gcs = client();
  try {
    gcs.check_bucket("no-such-bucket");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("gs://no-such-bucket/"), std::string::npos) << e.what();
  }
  gcs.check_bucket(bucket_);
}

}  // namespace
}  // namespace ft

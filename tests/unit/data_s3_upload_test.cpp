// S3Client's writing half against a real S3 server. tests/s3/test_s3_upload.py starts moto (and
// a fault-injecting front before it) and runs this binary with FT_TEST_S3_ENDPOINT,
// FT_TEST_S3_FRONT and FT_TEST_S3_BUCKET set; without them (a plain `ctest -L unit`) every test
// is skipped. What the server holds afterwards (no multipart upload left) is checked there.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>

#include "data/objstore/s3.h"
#include "upload_test_files.h"
#include "util/error.h"

namespace ft {
namespace {

class S3Upload : public ::testing::Test {
 protected:
  void SetUp() override {
    endpoint_ = upload_test::env_or_empty("FT_TEST_S3_ENDPOINT");
    bucket_ = upload_test::env_or_empty("FT_TEST_S3_BUCKET");
    if (endpoint_.empty() || bucket_.empty()) GTEST_SKIP() << "no S3 server (run by tests/s3/test_s3_upload.py)";
  }
  S3Client client(const std::string& endpoint, int retries = 4) {
    ObjectStoreOptions o;
    o.s3_endpoint = endpoint;
    o.retries = retries;
    o.backoff_s = 0.01;
    return S3Client(o);
  }
  static std::string file_of(size_t n, uint32_t seed) { return upload_test::random_file("s3_upload", n, seed); }
  static std::string read(const std::string& path) { return upload_test::read_all(path); }
  std::string endpoint_, bucket_;
};

TEST_F(S3Upload, PutStatGetRemove) {
  S3Client s3 = client(endpoint_);
  UploadReport r = s3.put(bucket_, "small/a b.txt", "hello, store");
  EXPECT_EQ(r.bytes, 12u);
  EXPECT_EQ(r.parts, 0);
  EXPECT_EQ(r.etag, md5_hex("hello, store"));
  EXPECT_EQ(s3.stat(bucket_, "small/a b.txt").size, 12u);
  EXPECT_EQ(s3.get(bucket_, "small/a b.txt"), "hello, store");
  s3.put(bucket_, "small/empty", "");
  EXPECT_EQ(s3.get(bucket_, "small/empty"), "");
  s3.remove(bucket_, "small/a b.txt");
  EXPECT_THROW(s3.stat(bucket_, "small/a b.txt"), Error);
  s3.remove(bucket_, "small/a b.txt");  // deleting what is gone is not an error
}

TEST_F(S3Upload, ListAfterPutAndRemove) {
  S3Client s3 = client(endpoint_);
  for (const char* k : {"tree/step_1/x", "tree/step_1/y", "tree/step_2/x", "treetop"}) s3.put(bucket_, k, k);
  s3.remove(bucket_, "tree/step_1/y");
  std::vector<std::string> keys;
  for (const StoreObject& o : s3.list(bucket_, "tree")) keys.push_back(o.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"tree/step_1/x", "tree/step_2/x", "treetop"}));
}

TEST_F(S3Upload, MultipartRoundTrip) {
  S3Client s3 = client(endpoint_);
  const std::string path = file_of((11u << 20) + 123, 1);
  UploadReport r = s3.upload_file(bucket_, "big/multi.bin", path, UploadOptions{5u << 20, 2});
  EXPECT_EQ(r.parts, 3);
  EXPECT_EQ(r.bytes, (11u << 20) + 123);
  EXPECT_EQ(r.sent, r.bytes);
  EXPECT_EQ(r.etag.substr(r.etag.size() - 2), "-3");
  EXPECT_EQ(s3.get(bucket_, "big/multi.bin"), read(path));
  // A file at or under one part is a single PUT.
  const std::string small = file_of(1000, 2);
  EXPECT_EQ(s3.upload_file(bucket_, "big/one.bin", small, UploadOptions{5u << 20, 2}).parts, 0);
  EXPECT_EQ(s3.get(bucket_, "big/one.bin"), read(small));
}

TEST_F(S3Upload, FailedPartAbortsTheUpload) {
  S3Client s3 = client(endpoint_);
  const std::string path = file_of((11u << 20), 3);
  s3.on_part = [](int part, int) {
    if (part == 2) throw Error("injected: part 2 fails");
  };
  EXPECT_THROW(s3.upload_file(bucket_, "aborted/multi.bin", path, UploadOptions{5u << 20, 2}), Error);
  EXPECT_THROW(s3.stat(bucket_, "aborted/multi.bin"), Error);  // nothing completed
  // (test_s3_upload.py checks that the server holds no multipart upload afterwards)
}

TEST_F(S3Upload, DroppedConnectionRetriesThePart) {
  const std::string front = upload_test::env_or_empty("FT_TEST_S3_FRONT");
  if (front.empty()) GTEST_SKIP() << "no fault-injecting front";
  S3Client s3 = client(front);
  const std::string path = file_of((11u << 20), 4);
  UploadReport r = s3.upload_file(bucket_, "dropped/multi.bin", path, UploadOptions{5u << 20, 2});
  EXPECT_EQ(r.parts, 3);
  // The front cut one part's first PUT: that part went twice, nothing else.
  EXPECT_GT(r.sent, r.bytes);
  EXPECT_LE(r.sent, r.bytes + (5u << 20));
  EXPECT_EQ(s3.get(bucket_, "dropped/multi.bin"), read(path));
}

TEST_F(S3Upload, MissingBucketIsOneClearError) {
  S3Client s3 = client(endpoint_);
  try {
    s3.check_bucket("no-such-bucket");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("NoSuchBucket"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ft

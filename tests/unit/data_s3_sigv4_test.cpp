// AWS Signature V4 against AWS's published S3 example ("GET Object" with a Range header, in
// the S3 API reference's "Signature Calculations for the Authorization Header"); botocore's
// S3SigV4Auth computes the same signature for it. The full client is tested against a real
// S3-compatible server with signature checking on (tests/s3/test_s3.py).
#include <gtest/gtest.h>

#include "data/objstore/s3.h"
#include "util/error.h"

namespace ft {
namespace {

TEST(SigV4, AwsGetObjectExample) {
  SigV4Request r;
  r.method = "GET";
  r.host = "examplebucket.s3.amazonaws.com";
  r.path = "/test.txt";
  r.headers = {{"host", "examplebucket.s3.amazonaws.com"},
               {"range", "bytes=0-9"},
               {"x-amz-content-sha256", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
               {"x-amz-date", "20130524T000000Z"}};
  r.payload_sha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
  std::string auth = sigv4_authorization(r, "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                                         "us-east-1", "s3", "20130524T000000Z");
  EXPECT_EQ(auth,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(SigV4, UriEncoding) {
  EXPECT_EQ(uri_encode("a b/c~d_e.f-g", false), "a%20b/c~d_e.f-g");
  EXPECT_EQ(uri_encode("a b/c", true), "a%20b%2Fc");
  EXPECT_EQ(uri_encode("файл", true), "%D1%84%D0%B0%D0%B9%D0%BB");
}

TEST(ObjectUrl, ParsesAndRejects) {
  ObjectUrl u = ObjectUrl::parse("s3://my-bucket/corpus/ru/");
  EXPECT_EQ(u.scheme, "s3");
  EXPECT_EQ(u.bucket, "my-bucket");
  EXPECT_EQ(u.prefix, "corpus/ru/");
  EXPECT_EQ(ObjectUrl::parse("s3://b").prefix, "");
  EXPECT_EQ(ObjectUrl::parse("s3://b/x").dir_prefix(), "x/");
  EXPECT_THROW(ObjectUrl::parse("s3://Bad_Bucket/x"), Error);
  EXPECT_THROW(ObjectUrl::parse("http://x/y"), Error);
  ObjectUrl g = ObjectUrl::parse("gs://my_bucket/datasets/en");
  EXPECT_EQ(g.scheme, "gs");
  EXPECT_EQ(g.bucket, "my_bucket");  // '_' is allowed in GCS bucket names
  EXPECT_EQ(g.prefix, "datasets/en");
  EXPECT_THROW(ObjectUrl::parse("gs:///x"), Error);
}

}  // namespace
}  // namespace ft

// A small S3 REST client (libcurl + OpenSSL): AWS Signature V4, ListObjectsV2 with pagination,
// ranged GETs with retries and resume of partial downloads, ETag/size verification. Speaks to
// AWS S3, MinIO and Google Cloud Storage's S3-compatible API.
//
// Configuration, as the AWS tools read it: endpoint from S3Options::endpoint (--s3-endpoint),
// else AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, else https://s3.<region>.amazonaws.com; region
// from AWS_REGION / AWS_DEFAULT_REGION (default us-east-1); credentials from AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN (unsigned requests when none are set). A custom
// endpoint uses path-style URLs (http://host:port/bucket/key); AWS uses virtual-hosted style.
//
//   S3Client s3(S3Options{});
//   for (const S3Object& o : s3.list("bucket", "corpus/")) s3.download("bucket", o, "local/" + o.key);
//   PullReport r = s3_pull("s3://bucket/corpus/", "data/raw", S3Options{});
//
// Errors name the URL and show the server's code and message:
//   "s3://bucket/x: HTTP 403 InvalidAccessKeyId: The AWS Access Key Id you provided does not exist"
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace ft {

struct S3Options {
  std::string endpoint;  // empty = environment / AWS default
  std::string region;    // empty = environment / us-east-1
  int retries = 4;       // extra attempts after a network error or HTTP 5xx/429
  double backoff_s = 0.2;  // first retry delay, doubled each time
  int list_page_size = 0;  // max-keys per listing page; 0 = the server's default (1000)
};

struct S3Url {
  std::string bucket, prefix;
  static bool is_s3(const std::string& s) { return s.rfind("s3://", 0) == 0; }
  static S3Url parse(const std::string& url);  // throws naming the URL
};

struct S3Object {
  std::string key, etag;  // etag without quotes
  uint64_t size = 0;
};

struct PullReport {
  uint64_t objects = 0, bytes = 0, skipped = 0, resumed_bytes = 0;
};

class S3Client {
 public:
  explicit S3Client(const S3Options& opt);
  ~S3Client();
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  // Every object under prefix, following continuation tokens.
  std::vector<S3Object> list(const std::string& bucket, const std::string& prefix);
  // Downloads to `path` through "<path>.part": an existing .part is resumed with a ranged GET.
  // Verifies the size, and the MD5 for single-part ETags. Returns bytes fetched now.
  uint64_t download(const std::string& bucket, const S3Object& obj, const std::string& path);
  // Bytes [first, first + n) of an object (n = 0: to the end).
  std::string get_range(const std::string& bucket, const std::string& key, uint64_t first, uint64_t n);
  const std::string& endpoint() const { return endpoint_; }

  // Test hook: called after each chunk written to a .part file, with the bytes so far; throwing
  // from it simulates an interrupted transfer.
  std::function<void(uint64_t)> on_progress;

 private:
  struct Response;
  Response request(const std::string& method, const std::string& bucket, const std::string& key,
                   const std::map<std::string, std::string>& query, const std::map<std::string, std::string>& headers,
                   const std::string& url_for_errors, const std::function<void(const char*, size_t)>& sink);
  std::string endpoint_, region_, access_key_, secret_key_, session_token_;
  bool path_style_ = true;
  S3Options opt_;
};

// Downloads every object under s3://bucket/prefix into dir (keys relative to the prefix),
// skipping files already present with the right size. Atomic per file (.part + rename).
PullReport s3_pull(const std::string& url, const std::string& dir, const S3Options& opt);

// AWS Signature V4 (exposed for tests against AWS's published examples).
struct SigV4Request {
  std::string method, host, path;                // path already URI-encoded, e.g. "/bucket/a%20b"
  std::map<std::string, std::string> query;      // raw (unencoded) names and values
  std::map<std::string, std::string> headers;    // lowercase names; host and x-amz-* included
  std::string payload_sha256;                    // hex, or "UNSIGNED-PAYLOAD"
};
// Returns the Authorization header value. amz_date is "YYYYMMDDTHHMMSSZ".
std::string sigv4_authorization(const SigV4Request& r, const std::string& access_key, const std::string& secret_key,
                                const std::string& region, const std::string& service, const std::string& amz_date);
std::string uri_encode(const std::string& s, bool encode_slash);

}  // namespace ft

// The S3 REST client (an ObjectStore, object_store.h): AWS Signature V4, ListObjectsV2 with
// pagination, ranged GETs pinned by If-Match to the listed ETag, MD5 check of single-part ETags.
// Speaks to AWS S3, MinIO and any S3-compatible store.
//
// Configuration, as the AWS tools read it: endpoint from ObjectStoreOptions::s3_endpoint
// (--s3-endpoint, data.endpoint), else AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, else
// https://s3.<region>.amazonaws.com; region from AWS_REGION / AWS_DEFAULT_REGION (default
// us-east-1); credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN
// (unsigned requests when none are set). A custom endpoint uses path-style URLs
// (http://host:port/bucket/key); AWS uses virtual-hosted style.
//
//   S3Client s3(ObjectStoreOptions{});
//   for (const StoreObject& o : s3.list("bucket", "corpus/")) s3.download("bucket", o, "local/" + o.key);
//
// Errors name the URL and show the server's code and message:
//   "s3://bucket/x: HTTP 403 InvalidAccessKeyId: The AWS Access Key Id you provided does not exist"
#pragma once

#include <map>
#include <string>
#include <vector>

#include "data/objstore/object_store.h"

namespace ft {

class S3Client final : public ObjectStore {
 public:
  explicit S3Client(const ObjectStoreOptions& opt);

  std::vector<StoreObject> list(const std::string& bucket, const std::string& prefix) override;
  StoreObject stat(const std::string& bucket, const std::string& key) override;

 protected:
  HttpResponse get_once(const std::string& bucket, const StoreObject& obj, uint64_t first,
                        const HttpSink& sink) override;
  [[noreturn]] void fail(const std::string& what, const HttpResponse& r) const override;

 private:
  HttpResponse request(const std::string& method, const std::string& bucket, const std::string& key,
                       const std::map<std::string, std::string>& query,
                       const std::map<std::string, std::string>& headers, const HttpSink& sink);
  std::string region_, access_key_, secret_key_, session_token_;
  bool path_style_ = true;
};

// AWS Signature V4 (exposed for tests against AWS's published examples).
struct SigV4Request {
  std::string method, host, path;              // path already URI-encoded, e.g. "/bucket/a%20b"
  std::map<std::string, std::string> query;    // raw (unencoded) names and values
  std::map<std::string, std::string> headers;  // lowercase names; host and x-amz-* included
  std::string payload_sha256;                  // hex, or "UNSIGNED-PAYLOAD"
};
// Returns the Authorization header value. amz_date is "YYYYMMDDTHHMMSSZ".
std::string sigv4_authorization(const SigV4Request& r, const std::string& access_key, const std::string& secret_key,
                                const std::string& region, const std::string& service, const std::string& amz_date);

}  // namespace ft

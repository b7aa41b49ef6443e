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
// Writing (s3_upload.cpp): put() for a small object, upload_file() for a file of any size (one
// PUT up to part_bytes, else a multipart upload with at most max_in_flight parts in flight,
// aborted on any failure so no parts are left behind); every PUT carries Content-MD5, which S3
// checks, and the ETag the server returns is compared with the MD5 we computed. remove() deletes
// one object. Listing is list() without a delimiter: moto, the test server, checks signatures
// of query values holding '/' against their decoded form, so callers group keys themselves.
//
//   S3Client s3(ObjectStoreOptions{});
//   UploadReport r = s3.upload_file("bucket", "ckpt/step_00000010/rank-00000.ftckpt", local_path);
//   s3.put("bucket", "ckpt/step_00000010/manifest.json", text);
//
// Errors name the URL and show the server's code and message:
//   "s3://bucket/x: HTTP 403 InvalidAccessKeyId: The AWS Access Key Id you provided does not exist"
#pragma once

#include <cstdint>
#include <functional>
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

  // Whether the bucket exists and these credentials may list it; throws the server's error otherwise.
  void check_bucket(const std::string& bucket);
  UploadReport put(const std::string& bucket, const std::string& key, const std::string& data);
  UploadReport upload_file(const std::string& bucket, const std::string& key, const std::string& path,
                           const UploadOptions& up = {});
  void remove(const std::string& bucket, const std::string& key);
  // A server-side copy (CopyObject: objects up to 5 GB).
  void copy(const std::string& bucket, const std::string& from_key, const std::string& to_key);
  // Multipart uploads begun under `prefix` and neither completed nor aborted (ListMultipartUploads):
  // what a process killed mid-upload leaves; abort_upload() frees their parts.
  struct PendingUpload {
    std::string key, upload_id;
  };
  std::vector<PendingUpload> list_uploads(const std::string& bucket, const std::string& prefix);
  void abort_upload(const std::string& bucket, const std::string& key, const std::string& upload_id);
  // Test hook: called before each part's attempt (part number, attempt); throwing fails the upload.
  std::function<void(int, int)> on_part;

 protected:
  HttpResponse get_once(const std::string& bucket, const StoreObject& obj, uint64_t first, uint64_t end,
                        const HttpSink& sink) override;
  [[noreturn]] void fail(const std::string& what, const HttpResponse& r) const override;

 private:
  HttpResponse request(const std::string& method, const std::string& bucket, const std::string& key,
                       const std::map<std::string, std::string>& query,
                       const std::map<std::string, std::string>& headers, const HttpSink& sink,
                       const std::string& body = "");
  UploadReport upload_multipart(const std::string& bucket, const std::string& key, const std::string& path,
                                uint64_t size, const UploadOptions& up);
  std::string put_part(const std::string& bucket, const std::string& key, const std::string& upload_id, int part,
                       const std::string& data, uint64_t* sent);
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

// Helpers shared by s3.cpp and s3_upload.cpp.
std::string s3_xml_tag(const std::string& xml, const std::string& tag, size_t from = 0, size_t* end = nullptr);
std::string md5_hex(const std::string& data);
std::string md5_base64(const std::string& data);

}  // namespace ft

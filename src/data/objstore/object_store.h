// Object storage as the data pipeline uses it: list a prefix, download an object (ranged GETs,
// retries, resume of a dropped or earlier partial transfer, size and checksum verification),
// read a small object whole. Two implementations speak the stores' own protocols:
// S3Client (s3.h: AWS S3, MinIO, any S3-compatible store; SigV4) and GcsClient (gcs.h: Google
// Cloud Storage's JSON API; OAuth2 bearer tokens). The transfer logic lives here, once; a
// client supplies listing, one GET attempt and its server's error format.
//
//   ObjectUrl u = ObjectUrl::parse("gs://corpus/datasets/manpages");
//   std::unique_ptr<ObjectStore> store = open_object_store(u.scheme, ObjectStoreOptions{});
//   for (const StoreObject& o : store->list(u.bucket, u.prefix)) store->download(u.bucket, o, "local/" + o.key);
//   PullReport r = object_pull("s3://bucket/corpus/", "data/raw", ObjectStoreOptions{});
//
// Errors name the URL and show the server's code and message in one line, e.g.
//   "gs://corpus/x: HTTP 404 notFound: The specified bucket does not exist."
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/objstore/http_client.h"

namespace ft {

struct ObjectStoreOptions {
  std::string s3_endpoint;   // empty = AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL / AWS
  std::string gcs_endpoint;  // empty = STORAGE_EMULATOR_HOST / https://storage.googleapis.com
  std::string region;        // S3 only; empty = AWS_REGION / AWS_DEFAULT_REGION / us-east-1
  int retries = 4;           // extra attempts after a network error or HTTP 5xx/429
  double backoff_s = 0.2;    // first retry delay, doubled each time
  int list_page_size = 0;    // objects per listing page; 0 = the server's default
  bool gcs_write = false;    // GCS: ask for a read-write token (checkpoints), not a read-only one
};

// s3://bucket/prefix or gs://bucket/prefix.
struct ObjectUrl {
  std::string scheme;  // "s3" or "gs"
  std::string bucket, prefix;
  static bool is_object_url(const std::string& s);
  static ObjectUrl parse(const std::string& url);  // throws naming the URL
  std::string str() const { return scheme + "://" + bucket + "/" + prefix; }
  // The prefix as a "directory": "" or ending in '/'.
  std::string dir_prefix() const { return prefix.empty() || prefix.back() == '/' ? prefix : prefix + "/"; }
};

struct StoreObject {
  std::string key;
  uint64_t size = 0;
  std::string etag;                // S3: the ETag without quotes
  int64_t generation = 0;          // GCS: the object's generation (its version)
  std::optional<uint32_t> crc32c;  // GCS: CRC32C of the content
  std::string md5;                 // hex MD5 of the content when the store says it (GCS md5Hash, S3 single-part ETag)
};

// Writing (S3Client: s3_upload.cpp; GcsClient: gcs_upload.cpp).
struct UploadOptions {
  uint64_t part_bytes = 8ull << 20;  // S3: multipart above this (its minimum part is 5 MiB); GCS: the
                                     // resumable upload's chunk (rounded down to a multiple of 256 KiB)
  int max_in_flight = 4;             // S3: parts uploaded at once (each holds part_bytes of memory)
};

struct UploadReport {
  uint64_t bytes = 0;  // the object's size
  uint64_t sent = 0;   // bytes sent, retries included
  int parts = 0;       // S3: 0 = a single PUT; GCS: chunks sent (resent ones included)
  std::string etag;    // S3: as the server confirmed it (without quotes); GCS: its crc32c (base64)
  double seconds = 0;
};

struct PullReport {
  uint64_t objects = 0, bytes = 0, skipped = 0, resumed_bytes = 0;
};

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;
  ObjectStore(const ObjectStore&) = delete;
  ObjectStore& operator=(const ObjectStore&) = delete;

  // Every object under prefix, following the listing's pages.
  virtual std::vector<StoreObject> list(const std::string& bucket, const std::string& prefix) = 0;
  // One object's size, version and checksums; throws naming the URL when it does not exist.
  virtual StoreObject stat(const std::string& bucket, const std::string& key) = 0;

  // Downloads to `path` through "<path>.part": an existing .part (an earlier run) is resumed,
  // and so is a transfer whose connection drops, with ranged GETs pinned to the listed version
  // (If-Match / ifGenerationMatch). Verifies the size, then CRC32C and/or MD5 when known; a
  // mismatch removes the .part and throws. Returns the bytes received now.
  uint64_t download(const std::string& bucket, const StoreObject& obj, const std::string& path);
  // A small object whole (a manifest).
  std::string get(const std::string& bucket, const std::string& key);
  // Bytes [offset, offset + n) of `obj` into dst with one ranged GET (retried from where a dropped
  // connection left off), pinned to the version stat() or list() gave; throws naming the URL when
  // the object changed or the store sends fewer bytes. Returns the bytes received (retries included).
  uint64_t get_range(const std::string& bucket, const StoreObject& obj, uint64_t offset, uint64_t n, void* dst);

  const std::string& endpoint() const { return endpoint_; }
  const std::string& scheme() const { return scheme_; }
  std::string url_of(const std::string& bucket, const std::string& key) const {
    return scheme_ + "://" + bucket + "/" + key;
  }

  // Test hook: called after each chunk written to a .part file, with the bytes so far; throwing
  // from it simulates an interrupted transfer.
  std::function<void(uint64_t)> on_progress;

 protected:
  ObjectStore(std::string scheme, const ObjectStoreOptions& opt) : scheme_(std::move(scheme)), opt_(opt) {}
  // One GET of bytes [first, end) of `obj` (end 0: to the object's end), pinned to its listed
  // version; the body goes to sink.
  virtual HttpResponse get_once(const std::string& bucket, const StoreObject& obj, uint64_t first, uint64_t end,
                                const HttpSink& sink) = 0;
  // The server's error response as one ft::Error naming `what` (the URL) with a hint.
  [[noreturn]] virtual void fail(const std::string& what, const HttpResponse& r) const = 0;
  // Runs `attempt` until it succeeds (2xx), fails for good, or retries run out (5xx, 429, network).
  HttpResponse with_retries(const std::string& what, const std::function<HttpResponse()>& attempt) const;

  std::string scheme_, endpoint_;
  ObjectStoreOptions opt_;
};

bool retryable_status(long status);
// The Range header's value for bytes [first, end) (end 0: to the object's end).
std::string byte_range(uint64_t first, uint64_t end);

// Bytes [offset, offset + n) of an open file (an upload's part or chunk); throws naming `path` on a
// short read.
std::string read_range(int fd, const std::string& path, uint64_t offset, uint64_t n);

// An S3Client for "s3", a GcsClient for "gs".
std::unique_ptr<ObjectStore> open_object_store(const std::string& scheme, const ObjectStoreOptions& opt);

// Downloads every object under the URL's prefix into dir (keys relative to the prefix),
// skipping files already present with the right size. Atomic per file (.part + rename).
PullReport object_pull(const std::string& url, const std::string& dir, const ObjectStoreOptions& opt);

}  // namespace ft

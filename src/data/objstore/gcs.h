// The Google Cloud Storage client (an ObjectStore, object_store.h) over GCS's own JSON API:
// listing with pagination (pageToken), object metadata (size, generation, crc32c, md5Hash),
// media downloads with Range pinned to the listed generation (ifGenerationMatch), CRC32C and
// MD5 checks of what arrived.
//
// Endpoint: ObjectStoreOptions::gcs_endpoint (--gcs-endpoint, data.endpoint), else
// STORAGE_EMULATOR_HOST (as Google's client libraries read it), else
// https://storage.googleapis.com. Credentials, in order:
//   GOOGLE_OAUTH_ACCESS_TOKEN        a bearer token used as is;
//   GOOGLE_APPLICATION_CREDENTIALS   a service-account key file (JSON): a JWT signed with its
//                                    RS256 key is exchanged at its token_uri for an access
//                                    token (scope devstorage.read_only), renewed before expiry;
//   neither                          unauthenticated requests (public buckets, emulators).
//
//   GcsClient gcs(ObjectStoreOptions{});
//   for (const StoreObject& o : gcs.list("bucket", "corpus/")) gcs.download("bucket", o, "local/" + o.key);
//
// Writing (gcs_upload.cpp), for checkpoints (ObjectStoreOptions::gcs_write asks the token for
// read-write): upload_file() and put() are resumable uploads — a session is initiated (its
// metadata declares the object's CRC32C), the bytes go in chunks of a multiple of 256 KiB (the
// last one carries `x-goog-hash: crc32c=…`), and when a chunk's connection drops or the server
// answers 5xx the session's committed offset is asked for (`Content-Range: bytes */size`) and the
// upload goes on from there, so a byte is sent again only when the server did not keep it. The
// object the server reports at the end must have the file's size and CRC32C; a failed upload
// cancels its session. remove() deletes (a missing object is no error), copy() is a server-side
// rewrite, check_bucket() reads the bucket's metadata.
//
//   GcsClient gcs(ObjectStoreOptions{.gcs_write = true});
//   gcs.check_bucket("ckpt");
//   UploadReport r = gcs.upload_file("ckpt", "run/step_00000010/rank-00000.ftckpt", local_path);
//
// Errors show the server's reason and message in one line:
//   "gs://corpus/x: HTTP 404 notFound: The specified bucket does not exist."
//   "gs://corpus/x: token request to http://127.0.0.1:9/token: HTTP 400 invalid_grant: Invalid JWT Signature."
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "data/objstore/object_store.h"

namespace ft {

class GcsClient final : public ObjectStore {
 public:
  explicit GcsClient(const ObjectStoreOptions& opt);

  std::vector<StoreObject> list(const std::string& bucket, const std::string& prefix) override;
  StoreObject stat(const std::string& bucket, const std::string& key) override;

  // Writing (gcs_upload.cpp).
  void check_bucket(const std::string& bucket);
  UploadReport put(const std::string& bucket, const std::string& key, const std::string& data);
  UploadReport upload_file(const std::string& bucket, const std::string& key, const std::string& path,
                           const UploadOptions& up = {});
  void remove(const std::string& bucket, const std::string& key);
  void copy(const std::string& bucket, const std::string& from_key, const std::string& to_key);
  // Test hook: called before each chunk is sent (its first byte, attempt); throwing fails the upload.
  std::function<void(uint64_t, int)> on_chunk;

 protected:
  HttpResponse get_once(const std::string& bucket, const StoreObject& obj, uint64_t first, uint64_t end,
                        const HttpSink& sink) override;
  [[noreturn]] void fail(const std::string& what, const HttpResponse& r) const override;

 private:
  HttpResponse get_json(const std::string& what, const std::string& url);
  // One request with this client's credentials (no retries).
  HttpResponse send(const std::string& what, HttpRequest req);
  using ReadRange = std::function<std::string(uint64_t offset, uint64_t bytes)>;
  UploadReport upload(const std::string& bucket, const std::string& key, uint64_t size, uint32_t crc,
                      const ReadRange& read, uint64_t chunk);
  // The session's committed bytes after a failed chunk (-1: the upload is complete; *done holds
  // the server's answer then).
  int64_t committed(const std::string& what, const std::string& session, uint64_t size, HttpResponse* done);
  // "Bearer …" for the next request ("" = anonymous); fetches or renews the token when needed.
  std::string authorization(const std::string& what);

  enum class Auth { kNone, kToken, kServiceAccount } auth_ = Auth::kNone;
  std::string key_file_, client_email_, private_key_pem_, private_key_id_, token_uri_;
  std::mutex token_mu_;
  std::string token_;
  double token_expires_ = 0;  // steady seconds
};

// A signed JWT (RS256) for the OAuth2 service-account flow; exposed for tests.
std::string service_account_jwt(const std::string& client_email, const std::string& private_key_pem,
                                const std::string& key_id, const std::string& audience, const std::string& scope,
                                int64_t issued_at, int64_t lifetime_s);
std::string base64url(const std::string& bytes);

}  // namespace ft

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
// Errors show the server's reason and message in one line:
//   "gs://corpus/x: HTTP 404 notFound: The specified bucket does not exist."
//   "gs://corpus/x: token request to http://127.0.0.1:9/token: HTTP 400 invalid_grant: Invalid JWT Signature."
#pragma once

#include <cstdint>
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

 protected:
  HttpResponse get_once(const std::string& bucket, const StoreObject& obj, uint64_t first,
                        const HttpSink& sink) override;
  [[noreturn]] void fail(const std::string& what, const HttpResponse& r) const override;

 private:
  HttpResponse get_json(const std::string& what, const std::string& url);
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

#include "data/objstore/gcs.h"

#include <openssl/evp.h>
#include <openssl/pem.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <nlohmann/json.hpp>

#include "data/objstore/crc32c.h"
#include "util/env.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/strings.h"

namespace ft {
namespace {

using json = nlohmann::json;

double steady_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string base64_to_hex(const std::string& b64) {
  std::string raw(b64.size(), '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(raw.data()),
                          reinterpret_cast<const unsigned char*>(b64.data()), static_cast<int>(b64.size()));
  if (n < 0) return "";
  size_t pad = 0;
  for (size_t i = b64.size(); i > 0 && b64[i - 1] == '='; --i) ++pad;
  raw.resize(static_cast<size_t>(n) - pad);
  return hex_lower(raw);
}

uint64_t json_u64(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_string()) return std::strtoull(v.get<std::string>().c_str(), nullptr, 10);
  return 0;
}

StoreObject object_from_json(const json& it) {
  StoreObject o;
  o.key = it.value("name", "");
  if (it.contains("size")) o.size = json_u64(it["size"]);
  if (it.contains("generation")) o.generation = static_cast<int64_t>(json_u64(it["generation"]));
  if (it.contains("crc32c") && it["crc32c"].is_string()) o.crc32c = crc32c_from_base64(it["crc32c"].get<std::string>());
  if (it.contains("md5Hash") && it["md5Hash"].is_string()) o.md5 = base64_to_hex(it["md5Hash"].get<std::string>());
  return o;
}

const char* kScope = "https://www.googleapis.com/auth/devstorage.read_only";
const char* kWriteScope = "https://www.googleapis.com/auth/devstorage.read_write";
const char* kCredentialsHint =
    "check GOOGLE_APPLICATION_CREDENTIALS (a service-account key file) or GOOGLE_OAUTH_ACCESS_TOKEN, and that the "
    "account may read the bucket";

}  // namespace

std::string base64url(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  while (!out.empty() && out.back() == '=') out.pop_back();
  for (char& c : out) c = c == '+' ? '-' : c == '/' ? '_' : c;
  return out;
}

std::string service_account_jwt(const std::string& client_email, const std::string& private_key_pem,
                                const std::string& key_id, const std::string& audience, const std::string& scope,
                                int64_t issued_at, int64_t lifetime_s) {
  json header = {{"alg", "RS256"}, {"typ", "JWT"}};
  if (!key_id.empty()) header["kid"] = key_id;
  json claims = {
      {"iss", client_email}, {"scope", scope}, {"aud", audience}, {"iat", issued_at}, {"exp", issued_at + lifetime_s}};
  std::string signing_input = base64url(header.dump()) + "." + base64url(claims.dump());
  BIO* bio = BIO_new_mem_buf(private_key_pem.data(), static_cast<int>(private_key_pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (!key) throw Error("the service-account key's private_key is not a PEM private key", kCredentialsHint);
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  size_t len = 0;
  bool ok = EVP_DigestSignInit(md, nullptr, EVP_sha256(), nullptr, key) == 1 &&
            EVP_DigestSign(md, nullptr, &len, reinterpret_cast<const unsigned char*>(signing_input.data()),
                           signing_input.size()) == 1;
  std::string sig(len, '\0');
  ok = ok && EVP_DigestSign(md, reinterpret_cast<unsigned char*>(sig.data()), &len,
                            reinterpret_cast<const unsigned char*>(signing_input.data()), signing_input.size()) == 1;
  EVP_MD_CTX_free(md);
  EVP_PKEY_free(key);
  if (!ok) throw Error("signing the service-account JWT failed (is the key an RSA key?)", kCredentialsHint);
  sig.resize(len);
  return signing_input + "." + base64url(sig);
}

GcsClient::GcsClient(const ObjectStoreOptions& opt) : ObjectStore("gs", opt) {
  endpoint_ = !opt.gcs_endpoint.empty() ? opt.gcs_endpoint : env_string("STORAGE_EMULATOR_HOST");
  if (endpoint_.empty()) endpoint_ = "https://storage.googleapis.com";
  if (endpoint_.find("://") == std::string::npos) endpoint_ = "http://" + endpoint_;  // emulator "host:port"
  while (!endpoint_.empty() && endpoint_.back() == '/') endpoint_.pop_back();
  if (endpoint_.rfind("http://", 0) != 0 && endpoint_.rfind("https://", 0) != 0) {
    throw Error(
        fmt::format("GCS endpoint \"{}\" must start with http:// or https://", endpoint_),
        "e.g. --gcs-endpoint http://127.0.0.1:4443 (an emulator); the default is https://storage.googleapis.com");
  }
  if (!env_string("GOOGLE_OAUTH_ACCESS_TOKEN").empty()) {
    auth_ = Auth::kToken;
    token_ = env_string("GOOGLE_OAUTH_ACCESS_TOKEN");
  } else if (!env_string("GOOGLE_APPLICATION_CREDENTIALS").empty()) {
    auth_ = Auth::kServiceAccount;
    key_file_ = env_string("GOOGLE_APPLICATION_CREDENTIALS");
    json k;
    try {
      k = json::parse(read_file(key_file_));
    } catch (const json::exception& e) {
      throw Error(fmt::format("GOOGLE_APPLICATION_CREDENTIALS={}: not valid JSON: {}", key_file_, e.what()),
                  "point it at a service-account key file downloaded from the Cloud console");
    }
    auto field = [&](const char* name) {
      if (!k.is_object() || !k.contains(name) || !k[name].is_string()) {
        throw Error(fmt::format("GOOGLE_APPLICATION_CREDENTIALS={}: the key file has no \"{}\"", key_file_, name),
                    "use a service-account key (\"type\": \"service_account\"); for a user token set "
                    "GOOGLE_OAUTH_ACCESS_TOKEN");
      }
      return k[name].get<std::string>();
    };
    if (field("type") != "service_account") {
      throw Error(fmt::format("GOOGLE_APPLICATION_CREDENTIALS={}: \"type\" is \"{}\", not \"service_account\"",
                              key_file_, field("type")),
                  "use a service-account key file, or set GOOGLE_OAUTH_ACCESS_TOKEN to a bearer token");
    }
    client_email_ = field("client_email");
    private_key_pem_ = field("private_key");
    token_uri_ = k.contains("token_uri") && k["token_uri"].is_string() ? k["token_uri"].get<std::string>()
                                                                       : "https://oauth2.googleapis.com/token";
    private_key_id_ =
        k.contains("private_key_id") && k["private_key_id"].is_string() ? k["private_key_id"].get<std::string>() : "";
  }
}

std::string GcsClient::authorization(const std::string& what) {
  if (auth_ == Auth::kNone) return "";
  std::lock_guard<std::mutex> lock(token_mu_);
  if (auth_ == Auth::kToken || (!token_.empty() && steady_now() < token_expires_ - 60)) return "Bearer " + token_;
  std::string jwt =
      service_account_jwt(client_email_, private_key_pem_, private_key_id_, token_uri_,
                          opt_.gcs_write ? kWriteScope : kScope, static_cast<int64_t>(std::time(nullptr)), 3600);
  HttpRequest req;
  req.method = "POST";
  req.url = token_uri_;
  req.headers["content-type"] = "application/x-www-form-urlencoded";
  req.body = "grant_type=" + uri_encode("urn:ietf:params:oauth:grant-type:jwt-bearer", true) +
             "&assertion=" + uri_encode(jwt, true);
  std::string where = fmt::format("{}: token request to {}", what, token_uri_);
  HttpResponse r = with_retries(where, [&] { return http_request(req); });
  if (r.status < 0) throw Error(fmt::format("{}: {}", where, r.body), "check the key file's token_uri and the network");
  json j = json::parse(r.body, nullptr, false);
  if (r.status != 200 || !j.is_object() || !j.contains("access_token")) {
    std::string code =
        j.is_object() && j.contains("error") && j["error"].is_string() ? j["error"].get<std::string>() : "";
    std::string msg = j.is_object() && j.contains("error_description") && j["error_description"].is_string()
                          ? j["error_description"].get<std::string>()
                          : r.body.substr(0, 200);
    throw Error(fmt::format("{}: HTTP {} {}: {}", where, r.status, code.empty() ? "(no error code)" : code, msg),
                fmt::format("check the service-account key in GOOGLE_APPLICATION_CREDENTIALS={}", key_file_));
  }
  token_ = j["access_token"].get<std::string>();
  double ttl = j.contains("expires_in") && j["expires_in"].is_number() ? j["expires_in"].get<double>() : 3600;
  token_expires_ = steady_now() + ttl;
  return "Bearer " + token_;
}

void GcsClient::fail(const std::string& what, const HttpResponse& r) const {
  if (r.status < 0) {
    throw Error(fmt::format("{}: cannot reach {}: {}", what, endpoint_, r.body),
                "check --gcs-endpoint / data.endpoint / STORAGE_EMULATOR_HOST and the network");
  }
  std::string reason, msg;
  json j = json::parse(r.body, nullptr, false);
  if (j.is_object() && j.contains("error")) {
    const json& e = j["error"];
    if (e.is_object()) {
      msg = e.value("message", "");
      if (e.contains("errors") && e["errors"].is_array() && !e["errors"].empty() && e["errors"][0].is_object())
        reason = e["errors"][0].value("reason", "");
      if (reason.empty()) reason = e.value("status", "");
    } else if (e.is_string()) {
      reason = e.get<std::string>();
      msg = j.value("error_description", "");
    }
  }
  if (msg.empty()) {
    msg = r.body.substr(0, 200);
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == '\r')) msg.pop_back();
    if (msg.empty()) msg = "(empty response)";
  }
  if (reason.empty()) reason = r.status == 404 ? "notFound" : r.status == 401 ? "unauthorized" : "(no reason)";
  std::string hint;
  if (r.status == 401 || r.status == 403)
    hint = kCredentialsHint;
  else if (r.status == 404)
    hint = "check the bucket and object names and --gcs-endpoint";
  throw Error(fmt::format("{}: HTTP {} {}: {}", what, r.status, reason, msg), hint);
}

HttpResponse GcsClient::send(const std::string& what, HttpRequest req) {
  if (std::string a = authorization(what); !a.empty()) req.headers["authorization"] = a;
  return http_request(req);
}

HttpResponse GcsClient::get_json(const std::string& what, const std::string& url) {
  return with_retries(what, [&] {
    HttpRequest req;
    req.url = url;
    return send(what, req);
  });
}

std::vector<StoreObject> GcsClient::list(const std::string& bucket, const std::string& prefix) {
  std::vector<StoreObject> out;
  std::string what = url_of(bucket, prefix), page;
  while (true) {
    std::string url =
        fmt::format("{}/storage/v1/b/{}/o?prefix={}", endpoint_, uri_encode(bucket, true), uri_encode(prefix, true));
    if (opt_.list_page_size > 0) url += fmt::format("&maxResults={}", opt_.list_page_size);
    if (!page.empty()) url += "&pageToken=" + uri_encode(page, true);
    HttpResponse r = get_json(what, url);
    if (r.status != 200) fail(what, r);
    json j = json::parse(r.body, nullptr, false);
    if (!j.is_object()) throw Error(fmt::format("{}: the listing is not JSON: {}", what, r.body.substr(0, 200)));
    if (j.contains("items") && j["items"].is_array()) {
      for (const json& it : j["items"]) out.push_back(object_from_json(it));
    }
    page = j.contains("nextPageToken") && j["nextPageToken"].is_string() ? j["nextPageToken"].get<std::string>() : "";
    if (page.empty()) break;
  }
  return out;
}

StoreObject GcsClient::stat(const std::string& bucket, const std::string& key) {
  std::string what = url_of(bucket, key);
  HttpResponse r = get_json(
      what, fmt::format("{}/storage/v1/b/{}/o/{}", endpoint_, uri_encode(bucket, true), uri_encode(key, true)));
  if (r.status != 200) fail(what, r);
  json j = json::parse(r.body, nullptr, false);
  if (!j.is_object()) throw Error(fmt::format("{}: the object's metadata is not JSON", what));
  return object_from_json(j);
}

HttpResponse GcsClient::get_once(const std::string& bucket, const StoreObject& obj, uint64_t first, uint64_t end,
                                 const HttpSink& sink) {
  HttpRequest req;
  req.url =
      fmt::format("{}/storage/v1/b/{}/o/{}?alt=media", endpoint_, uri_encode(bucket, true), uri_encode(obj.key, true));
  if (obj.generation > 0) req.url += fmt::format("&ifGenerationMatch={}", obj.generation);
  if (first > 0 || end > 0) req.headers["range"] = byte_range(first, end);
  if (std::string a = authorization(url_of(bucket, obj.key)); !a.empty()) req.headers["authorization"] = a;
  return http_request(req, sink);
}

}  // namespace ft

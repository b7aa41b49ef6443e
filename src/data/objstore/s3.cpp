#include "data/objstore/s3.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <cstdlib>
#include <ctime>

#include "util/env.h"
#include "util/error.h"
#include "util/log.h"
#include "util/strings.h"

namespace ft {
namespace {

std::string sha256_hex(const std::string& data) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), md);
  return hex_lower(std::string_view(reinterpret_cast<const char*>(md), sizeof md));
}

std::string hmac(const std::string& key, const std::string& msg) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(msg.data()),
       msg.size(), md, &len);
  return std::string(reinterpret_cast<char*>(md), len);
}

std::string xml_unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out.push_back(s[i]);
      continue;
    }
    size_t semi = s.find(';', i);
    if (semi == std::string::npos) {
      out.push_back('&');
      continue;
    }
    std::string ent = s.substr(i + 1, semi - i - 1);
    if (ent == "quot")
      out.push_back('"');
    else if (ent == "amp")
      out.push_back('&');
    else if (ent == "lt")
      out.push_back('<');
    else if (ent == "gt")
      out.push_back('>');
    else if (ent == "apos")
      out.push_back('\'');
    else if (!ent.empty() && ent[0] == '#') {
      unsigned long cp = ent.size() > 1 && (ent[1] == 'x' || ent[1] == 'X')
                             ? std::strtoul(ent.c_str() + 2, nullptr, 16)
                             : std::strtoul(ent.c_str() + 1, nullptr, 10);
      if (cp < 0x80)
        out.push_back(static_cast<char>(cp));
      else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      }
    } else {
      out.append(s, i, semi - i + 1);
    }
    i = semi;
  }
  return out;
}

// Text of the first <tag>...</tag> at or after `from`; "" when absent. *end gets the position after it.
std::string xml_tag(const std::string& xml, const std::string& tag, size_t from = 0, size_t* end = nullptr) {
  std::string open = "<" + tag + ">", close = "</" + tag + ">";
  size_t a = xml.find(open, from);
  if (a == std::string::npos) return "";
  size_t b = xml.find(close, a + open.size());
  if (b == std::string::npos) return "";
  if (end) *end = b + close.size();
  std::string text = xml.substr(a + open.size(), b - a - open.size());
  if (text.rfind("<![CDATA[", 0) == 0 && text.size() >= 12 && text.compare(text.size() - 3, 3, "]]>") == 0) {
    return text.substr(9, text.size() - 12);
  }
  return xml_unescape(text);
}

std::string strip_quotes(std::string s) {
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  return s;
}

}  // namespace

std::string s3_xml_tag(const std::string& xml, const std::string& tag, size_t from, size_t* end) {
  return xml_tag(xml, tag, from, end);
}

std::string sigv4_authorization(const SigV4Request& r, const std::string& access_key, const std::string& secret_key,
                                const std::string& region, const std::string& service, const std::string& amz_date) {
  std::string query;
  std::map<std::string, std::string> encoded;
  for (auto& [k, v] : r.query) encoded[uri_encode(k, true)] = uri_encode(v, true);
  for (auto& [k, v] : encoded) query += (query.empty() ? "" : "&") + k + "=" + v;
  std::string canon_headers, signed_headers;
  for (auto& [k, v] : r.headers) {
    std::string val(v);
    size_t a = val.find_first_not_of(' '), b = val.find_last_not_of(' ');
    val = a == std::string::npos ? "" : val.substr(a, b - a + 1);
    canon_headers += k + ":" + val + "\n";
    signed_headers += (signed_headers.empty() ? "" : ";") + k;
  }
  std::string canonical =
      r.method + "\n" + r.path + "\n" + query + "\n" + canon_headers + "\n" + signed_headers + "\n" + r.payload_sha256;
  std::string date = amz_date.substr(0, 8);
  std::string scope = date + "/" + region + "/" + service + "/aws4_request";
  std::string to_sign = "AWS4-HMAC-SHA256\n" + amz_date + "\n" + scope + "\n" + sha256_hex(canonical);
  std::string key = hmac(hmac(hmac(hmac("AWS4" + secret_key, date), region), service), "aws4_request");
  std::string sig = hmac(key, to_sign);
  return "AWS4-HMAC-SHA256 Credential=" + access_key + "/" + scope + ", SignedHeaders=" + signed_headers +
         ", Signature=" + hex_lower(sig);
}

S3Client::S3Client(const ObjectStoreOptions& opt) : ObjectStore("s3", opt) {
  region_ = !opt.region.empty()                         ? opt.region
            : !env_string("AWS_REGION").empty()         ? env_string("AWS_REGION")
            : !env_string("AWS_DEFAULT_REGION").empty() ? env_string("AWS_DEFAULT_REGION")
                                                        : "us-east-1";
  endpoint_ = !opt.s3_endpoint.empty()                     ? opt.s3_endpoint
              : !env_string("AWS_ENDPOINT_URL_S3").empty() ? env_string("AWS_ENDPOINT_URL_S3")
                                                           : env_string("AWS_ENDPOINT_URL");
  if (endpoint_.empty()) {
    endpoint_ = "https://s3." + region_ + ".amazonaws.com";
    path_style_ = false;
  }
  while (!endpoint_.empty() && endpoint_.back() == '/') endpoint_.pop_back();
  if (endpoint_.rfind("http://", 0) != 0 && endpoint_.rfind("https://", 0) != 0) {
    throw Error(fmt::format("S3 endpoint \"{}\" must start with http:// or https://", endpoint_),
                "e.g. --s3-endpoint http://127.0.0.1:9000 (MinIO)");
  }
  access_key_ = env_string("AWS_ACCESS_KEY_ID");
  secret_key_ = env_string("AWS_SECRET_ACCESS_KEY");
  session_token_ = env_string("AWS_SESSION_TOKEN");
  if (access_key_.empty() != secret_key_.empty()) {
    throw Error("only one of AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY is set",
                "set both, or neither for public buckets");
  }
}

HttpResponse S3Client::request(const std::string& method, const std::string& bucket, const std::string& key,
                               const std::map<std::string, std::string>& query,
                               const std::map<std::string, std::string>& extra_headers, const HttpSink& sink,
                               const std::string& body) {
  std::string scheme_end = "://";
  size_t hs = endpoint_.find(scheme_end) + scheme_end.size();
  std::string host = endpoint_.substr(hs);
  std::string base_path;
  if (size_t slash = host.find('/'); slash != std::string::npos) {
    base_path = host.substr(slash);
    host = host.substr(0, slash);
  }
  std::string path = base_path;
  if (path_style_) {
    path += "/" + bucket;
    if (!key.empty()) path += "/" + uri_encode(key, false);
  } else {
    host = bucket + "." + host;
    path += "/" + uri_encode(key, false);
  }
  HttpRequest req;
  req.method = method;
  req.url = endpoint_.substr(0, hs) + host + path;
  std::string qs;
  for (auto& [k, v] : query) qs += (qs.empty() ? "?" : "&") + uri_encode(k, true) + "=" + uri_encode(v, true);
  req.url += qs;
  req.body = body;

  std::map<std::string, std::string> headers = extra_headers;
  headers["host"] = host;
  // libcurl would label a body form data, which servers may parse (and consume) as a form.
  if (!body.empty() && !headers.count("content-type")) headers["content-type"] = "application/octet-stream";
  if (!access_key_.empty()) {
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char date[32];
    std::strftime(date, sizeof date, "%Y%m%dT%H%M%SZ", &tm);
    headers["x-amz-date"] = date;
    headers["x-amz-content-sha256"] = sha256_hex(body);
    if (!session_token_.empty()) headers["x-amz-security-token"] = session_token_;
    SigV4Request sr{method, host, path, query, headers, headers["x-amz-content-sha256"]};
    headers["authorization"] = sigv4_authorization(sr, access_key_, secret_key_, region_, "s3", date);
  }
  req.headers = std::move(headers);
  return http_request(req, sink);
}

void S3Client::fail(const std::string& what, const HttpResponse& r) const {
  if (r.status < 0) {
    throw Error(fmt::format("{}: cannot reach {}: {}", what, endpoint_, r.body),
                "check --s3-endpoint / data.endpoint / AWS_ENDPOINT_URL and the network");
  }
  std::string code = xml_tag(r.body, "Code"), msg = xml_tag(r.body, "Message");
  std::string hint;
  if (code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" || code == "AccessDenied" ||
      code == "InvalidToken" || code == "ExpiredToken") {
    hint = "check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) for this endpoint";
  } else if (code == "NoSuchBucket") {
    hint = "check the bucket name, --s3-endpoint and AWS_REGION";
  } else if (code == "NoSuchKey" || r.status == 404) {
    hint = "check the URL; the object may have been deleted";
  }
  if (code.empty()) code = r.status == 404 ? "NotFound" : "(no error code)";
  // A HEAD answer has no body: a 404 there is an object that does not exist.
  if (msg.empty())
    msg = r.body.empty() ? (r.status == 404 ? "no such object" : "(empty response)") : r.body.substr(0, 200);
  throw Error(fmt::format("{}: HTTP {} {}: {}", what, r.status, code, msg), hint);
}

std::vector<StoreObject> S3Client::list(const std::string& bucket, const std::string& prefix) {
  std::vector<StoreObject> out;
  std::string token;
  std::string what = url_of(bucket, prefix);
  while (true) {
    std::map<std::string, std::string> q = {{"list-type", "2"}, {"prefix", prefix}};
    if (opt_.list_page_size > 0) q["max-keys"] = std::to_string(opt_.list_page_size);
    if (!token.empty()) q["continuation-token"] = token;
    HttpResponse r = with_retries(what, [&] { return request("GET", bucket, "", q, {}, nullptr); });
    if (r.status != 200) fail(what, r);
    size_t pos = 0, end = 0;
    while (true) {
      std::string item = xml_tag(r.body, "Contents", pos, &end);
      if (end <= pos) break;
      StoreObject o;
      o.key = xml_tag(item, "Key");
      o.size = std::strtoull(xml_tag(item, "Size").c_str(), nullptr, 10);
      o.etag = strip_quotes(xml_tag(item, "ETag"));
      // A single-part upload's ETag is the MD5 of the content; multipart ETags ("...-N") are not.
      if (o.etag.size() == 32 && o.etag.find('-') == std::string::npos) o.md5 = o.etag;
      out.push_back(std::move(o));
      pos = end;
    }
    if (xml_tag(r.body, "IsTruncated") != "true") break;
    token = xml_tag(r.body, "NextContinuationToken");
    if (token.empty()) throw Error(fmt::format("{}: truncated listing without a continuation token", what));
  }
  return out;
}

StoreObject S3Client::stat(const std::string& bucket, const std::string& key) {
  std::string what = url_of(bucket, key);
  HttpResponse r = with_retries(what, [&] { return request("HEAD", bucket, key, {}, {}, nullptr); });
  if (r.status != 200) fail(what, r);
  StoreObject o;
  o.key = key;
  o.size = std::strtoull(r.headers["content-length"].c_str(), nullptr, 10);
  o.etag = strip_quotes(r.headers["etag"]);
  if (o.etag.size() == 32 && o.etag.find('-') == std::string::npos) o.md5 = o.etag;
  return o;
}

HttpResponse S3Client::get_once(const std::string& bucket, const StoreObject& obj, uint64_t first, uint64_t end,
                                const HttpSink& sink) {
  std::map<std::string, std::string> h;
  if (first > 0 || end > 0) h["range"] = byte_range(first, end);
  if (!obj.etag.empty()) h["if-match"] = "\"" + obj.etag + "\"";
  return request("GET", bucket, obj.key, {}, h, sink);
}

}  // namespace ft

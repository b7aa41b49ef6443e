#include "data/s3.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <thread>

#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"

namespace ft {
namespace fs = std::filesystem;
namespace {

std::string hex(const unsigned char* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = d[p[i] >> 4];
    s[2 * i + 1] = d[p[i] & 15];
  }
  return s;
}

std::string sha256_hex(const std::string& data) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), md);
  return hex(md, sizeof md);
}

std::string hmac(const std::string& key, const std::string& msg) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(msg.data()),
       msg.size(), md, &len);
  return std::string(reinterpret_cast<char*>(md), len);
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
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
    if (ent == "quot") out.push_back('"');
    else if (ent == "amp") out.push_back('&');
    else if (ent == "lt") out.push_back('<');
    else if (ent == "gt") out.push_back('>');
    else if (ent == "apos") out.push_back('\'');
    else if (!ent.empty() && ent[0] == '#') {
      unsigned long cp = ent.size() > 1 && (ent[1] == 'x' || ent[1] == 'X') ? std::strtoul(ent.c_str() + 2, nullptr, 16)
                                                                           : std::strtoul(ent.c_str() + 1, nullptr, 10);
      if (cp < 0x80) out.push_back(static_cast<char>(cp));
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

struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
};

}  // namespace

std::string uri_encode(const std::string& s, bool encode_slash) {
  std::string out;
  for (unsigned char c : s) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
        c == '.' || c == '~' || (c == '/' && !encode_slash)) {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
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
         ", Signature=" + hex(reinterpret_cast<const unsigned char*>(sig.data()), sig.size());
}

S3Url S3Url::parse(const std::string& url) {
  if (!is_s3(url)) throw Error(fmt::format("{}: not an s3:// URL", url), "write s3://bucket/prefix");
  std::string rest = url.substr(5);
  size_t slash = rest.find('/');
  S3Url u;
  u.bucket = rest.substr(0, slash);
  u.prefix = slash == std::string::npos ? "" : rest.substr(slash + 1);
  if (u.bucket.empty() || u.bucket.size() > 63 || u.bucket.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789.-") != std::string::npos) {
    throw Error(fmt::format("{}: \"{}\" is not a valid bucket name", url, u.bucket),
                "bucket names are 1-63 lowercase letters, digits, '.' and '-'");
  }
  return u;
}

struct S3Client::Response {
  long status = 0;
  std::map<std::string, std::string> headers;  // lowercase names
  std::string body;                            // whole body for errors and for requests without a sink
};

S3Client::S3Client(const S3Options& opt) : opt_(opt) {
  static CurlGlobal init;
  region_ = !opt.region.empty() ? opt.region : !env("AWS_REGION").empty() ? env("AWS_REGION")
                                              : !env("AWS_DEFAULT_REGION").empty() ? env("AWS_DEFAULT_REGION")
                                                                                    : "us-east-1";
  endpoint_ = !opt.endpoint.empty() ? opt.endpoint : !env("AWS_ENDPOINT_URL_S3").empty() ? env("AWS_ENDPOINT_URL_S3")
                                                                                          : env("AWS_ENDPOINT_URL");
  if (endpoint_.empty()) {
    endpoint_ = "https://s3." + region_ + ".amazonaws.com";
    path_style_ = false;
  }
  while (!endpoint_.empty() && endpoint_.back() == '/') endpoint_.pop_back();
  if (endpoint_.rfind("http://", 0) != 0 && endpoint_.rfind("https://", 0) != 0) {
    throw Error(fmt::format("S3 endpoint \"{}\" must start with http:// or https://", endpoint_),
                "e.g. --s3-endpoint http://127.0.0.1:9000 (MinIO) or https://storage.googleapis.com (GCS)");
  }
  access_key_ = env("AWS_ACCESS_KEY_ID");
  secret_key_ = env("AWS_SECRET_ACCESS_KEY");
  session_token_ = env("AWS_SESSION_TOKEN");
  if (access_key_.empty() != secret_key_.empty()) {
    throw Error("only one of AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY is set", "set both, or neither for public buckets");
  }
}

S3Client::~S3Client() = default;

S3Client::Response S3Client::request(const std::string& method, const std::string& bucket, const std::string& key,
                                     const std::map<std::string, std::string>& query,
                                     const std::map<std::string, std::string>& extra_headers,
                                     const std::string& what, const std::function<void(const char*, size_t)>& sink) {
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
  std::string url = endpoint_.substr(0, hs) + host + path;
  std::string qs;
  for (auto& [k, v] : query) qs += (qs.empty() ? "?" : "&") + uri_encode(k, true) + "=" + uri_encode(v, true);
  url += qs;

  std::map<std::string, std::string> headers = extra_headers;
  headers["host"] = host;
  if (!access_key_.empty()) {
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char date[32];
    std::strftime(date, sizeof date, "%Y%m%dT%H%M%SZ", &tm);
    headers["x-amz-date"] = date;
    headers["x-amz-content-sha256"] = sha256_hex("");
    if (!session_token_.empty()) headers["x-amz-security-token"] = session_token_;
    SigV4Request sr{method, host, path, query, headers, headers["x-amz-content-sha256"]};
    headers["authorization"] = sigv4_authorization(sr, access_key_, secret_key_, region_, "s3", date);
  }

  Response resp;
  CURL* c = curl_easy_init();
  curl_slist* hl = nullptr;
  for (auto& [k, v] : headers) {
    if (k == "host") continue;  // curl sends it from the URL
    hl = curl_slist_append(hl, (k + ": " + v).c_str());
  }
  struct Ctx {
    Response* resp;
    const std::function<void(const char*, size_t)>* sink;
    std::exception_ptr error;
  } ctx{&resp, &sink, nullptr};
  // Headers arrive before the body, so the body callback knows the status: error bodies are
  // kept for their <Code> and <Message>, successful ones go to the sink.
  auto on_header = +[](char* p, size_t sz, size_t n, void* ud) -> size_t {
    auto* cx = static_cast<Ctx*>(ud);
    std::string line(p, sz * n);
    if (line.rfind("HTTP/", 0) == 0) {  // a new response (e.g. after 100-continue)
      cx->resp->headers.clear();
      size_t sp = line.find(' ');
      cx->resp->status = sp == std::string::npos ? 0 : std::atol(line.c_str() + sp + 1);
      return sz * n;
    }
    size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string name = line.substr(0, colon);
      for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      std::string val = line.substr(colon + 1);
      size_t a = val.find_first_not_of(" \t"), b = val.find_last_not_of(" \t\r\n");
      cx->resp->headers[name] = a == std::string::npos ? "" : val.substr(a, b - a + 1);
    }
    return sz * n;
  };
  auto on_body = +[](char* p, size_t sz, size_t n, void* ud) -> size_t {
    auto* cx = static_cast<Ctx*>(ud);
    if (cx->resp->status < 200 || cx->resp->status >= 300 || !*cx->sink) {
      cx->resp->body.append(p, sz * n);
      return sz * n;
    }
    try {
      (*cx->sink)(p, sz * n);
    } catch (...) {
      cx->error = std::current_exception();
      return 0;  // aborts the transfer
    }
    return sz * n;
  };
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
  if (method == "HEAD") curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &ctx);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &ctx);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  CURLcode rc = curl_easy_perform(c);
  curl_slist_free_all(hl);
  curl_easy_cleanup(c);
  if (ctx.error) std::rethrow_exception(ctx.error);
  if (rc != CURLE_OK) {
    resp.status = -static_cast<long>(rc);
    resp.body = curl_easy_strerror(rc);
  }
  return resp;
}

namespace {

bool retryable(long status) { return status < 0 || status == 429 || status >= 500; }

[[noreturn]] void throw_s3_error(const std::string& what, long status, const std::string& body, const std::string& endpoint) {
  if (status < 0) {
    throw Error(fmt::format("{}: cannot reach {}: {}", what, endpoint, body),
                "check --s3-endpoint / AWS_ENDPOINT_URL and the network");
  }
  std::string code = xml_tag(body, "Code"), msg = xml_tag(body, "Message");
  std::string hint;
  if (code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" || code == "AccessDenied" ||
      code == "InvalidToken" || code == "ExpiredToken") {
    hint = "check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) for this endpoint";
  } else if (code == "NoSuchBucket") {
    hint = "check the bucket name, --s3-endpoint and AWS_REGION";
  } else if (code == "NoSuchKey") {
    hint = "the object was deleted while we read it; retry";
  }
  if (code.empty()) code = "(no error code)";
  if (msg.empty()) msg = body.substr(0, 200);
  throw Error(fmt::format("{}: HTTP {} {}: {}", what, status, code, msg), hint);
}

}  // namespace

std::vector<S3Object> S3Client::list(const std::string& bucket, const std::string& prefix) {
  std::vector<S3Object> out;
  std::string token;
  std::string what = fmt::format("s3://{}/{}", bucket, prefix);
  while (true) {
    std::map<std::string, std::string> q = {{"list-type", "2"}, {"prefix", prefix}};
    if (opt_.list_page_size > 0) q["max-keys"] = std::to_string(opt_.list_page_size);
    if (!token.empty()) q["continuation-token"] = token;
    Response r;
    double delay = opt_.backoff_s;
    for (int attempt = 0;; ++attempt) {
      r = request("GET", bucket, "", q, {}, what, nullptr);
      if (r.status == 200 || !retryable(r.status) || attempt >= opt_.retries) break;
      std::this_thread::sleep_for(std::chrono::duration<double>(delay));
      delay *= 2;
    }
    if (r.status != 200) throw_s3_error(what, r.status, r.body, endpoint_);
    size_t pos = 0, end = 0;
    while (true) {
      std::string item = xml_tag(r.body, "Contents", pos, &end);
      if (end <= pos) break;
      S3Object o;
      o.key = xml_tag(item, "Key");
      o.size = std::strtoull(xml_tag(item, "Size").c_str(), nullptr, 10);
      o.etag = strip_quotes(xml_tag(item, "ETag"));
      out.push_back(std::move(o));
      pos = end;
    }
    if (xml_tag(r.body, "IsTruncated") != "true") break;
    token = xml_tag(r.body, "NextContinuationToken");
    if (token.empty()) throw Error(fmt::format("{}: truncated listing without a continuation token", what));
  }
  return out;
}

std::string S3Client::get_range(const std::string& bucket, const std::string& key, uint64_t first, uint64_t n) {
  std::string what = fmt::format("s3://{}/{}", bucket, key);
  std::map<std::string, std::string> h;
  if (first > 0 || n > 0) h["range"] = n ? fmt::format("bytes={}-{}", first, first + n - 1) : fmt::format("bytes={}-", first);
  std::string body;
  Response r;
  double delay = opt_.backoff_s;
  for (int attempt = 0;; ++attempt) {
    body.clear();
    r = request("GET", bucket, key, {}, h, what, [&](const char* p, size_t k) { body.append(p, k); });
    if ((r.status == 200 || r.status == 206) || !retryable(r.status) || attempt >= opt_.retries) break;
    std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    delay *= 2;
  }
  if (r.status != 200 && r.status != 206) throw_s3_error(what, r.status, r.body, endpoint_);
  return body;
}

uint64_t S3Client::download(const std::string& bucket, const S3Object& obj, const std::string& path) {
  std::string what = fmt::format("s3://{}/{}", bucket, obj.key);
  std::string part = path + ".part";
  std::error_code ec;
  if (auto parent = fs::path(path).parent_path(); !parent.empty()) fs::create_directories(parent, ec);
  uint64_t have = fs::exists(part, ec) ? fs::file_size(part, ec) : 0;
  if (have > obj.size) {
    fs::remove(part, ec);
    have = 0;
  }
  uint64_t fetched = 0;
  double delay = opt_.backoff_s;
  for (int attempt = 0; have < obj.size; ++attempt) {
    std::FILE* f = std::fopen(part.c_str(), have ? "ab" : "wb");
    if (!f) throw Error(fmt::format("cannot write {}: {}", part, std::strerror(errno)));
    std::map<std::string, std::string> h;
    if (have > 0) h["range"] = fmt::format("bytes={}-", have);
    if (!obj.etag.empty()) h["if-match"] = "\"" + obj.etag + "\"";
    uint64_t got = 0;
    bool restart = false;
    Response r;
    try {
      r = request("GET", bucket, obj.key, {}, h, what, [&](const char* p, size_t n) {
        if (std::fwrite(p, 1, n, f) != n) throw Error(fmt::format("writing {} failed", part), "is the disk full?");
        got += n;
        if (on_progress) on_progress(have + got);
      });
    } catch (...) {
      std::fclose(f);
      throw;
    }
    std::fclose(f);
    if (r.status == 200 && have > 0) restart = true;  // the server ignored Range: start over
    if (r.status == 412) {                          // the object changed since listing
      throw Error(fmt::format("{}: the object changed while downloading (ETag no longer {})", what, obj.etag),
                  "run the pull again");
    }
    if (r.status == 200 || r.status == 206) {
      if (restart) {
        // The file now holds the old prefix and then the whole object: keep only the latter.
        std::ifstream in(part, std::ios::binary);
        in.seekg(static_cast<std::streamoff>(have));
        std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        write_file_atomic(part, body);
        have = 0;
      }
      have += got;
      fetched += got;
      continue;
    }
    if (r.status > 0) {
      have += 0;  // nothing usable was written on an error status
      fs::resize_file(part, have, ec);
    } else {
      have = fs::file_size(part, ec);  // keep what arrived before the connection broke
      fetched += got;
    }
    if (!retryable(r.status) || attempt >= opt_.retries) throw_s3_error(what, r.status, r.body, endpoint_);
    log_warn("{}: {} — retrying from byte {} in {:.1f}s", what, r.status < 0 ? r.body : std::to_string(r.status), have,
             delay);
    std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    delay *= 2;
  }
  uint64_t size = fs::exists(part, ec) ? fs::file_size(part, ec) : 0;
  if (obj.size == 0 && size == 0) {
    std::FILE* f = std::fopen(part.c_str(), "wb");
    if (f) std::fclose(f);
  }
  if (size != obj.size) {
    fs::remove(part, ec);
    throw Error(fmt::format("{}: downloaded {} bytes, the listing says {}", what, size, obj.size), "run the pull again");
  }
  // A single-part upload's ETag is the MD5 of the content; multipart ETags ("...-N") are not.
  if (obj.etag.size() == 32 && obj.etag.find('-') == std::string::npos) {
    std::ifstream in(part, std::ios::binary);
    EVP_MD_CTX* md = EVP_MD_CTX_new();
    EVP_DigestInit_ex(md, EVP_md5(), nullptr);
    std::vector<char> buf(1 << 20);
    while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0) {
      EVP_DigestUpdate(md, buf.data(), static_cast<size_t>(in.gcount()));
    }
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int dl = 0;
    EVP_DigestFinal_ex(md, d, &dl);
    EVP_MD_CTX_free(md);
    std::string got = hex(d, dl);
    if (got != obj.etag) {
      fs::remove(part, ec);
      throw Error(fmt::format("{}: content MD5 {} does not match the ETag {}", what, got, obj.etag),
                  "the transfer was corrupted; run the pull again");
    }
  }
  {
    std::FILE* f = std::fopen(part.c_str(), "rb+");
    if (f) {
      ::fsync(fileno(f));
      std::fclose(f);
    }
  }
  fs::rename(part, path, ec);
  if (ec) throw Error(fmt::format("rename {} -> {}: {}", part, path, ec.message()));
  return fetched;
}

PullReport s3_pull(const std::string& url, const std::string& dir, const S3Options& opt) {
  S3Url u = S3Url::parse(url);
  S3Client s3(opt);
  std::vector<S3Object> objs = s3.list(u.bucket, u.prefix);
  PullReport rep;
  std::error_code ec;
  fs::create_directories(dir, ec);
  for (const S3Object& o : objs) {
    if (!o.key.empty() && o.key.back() == '/') continue;  // "folder" marker
    std::string rel = o.key.substr(std::min(u.prefix.size(), o.key.size()));
    while (!rel.empty() && rel[0] == '/') rel.erase(0, 1);
    if (rel.empty()) rel = fs::path(o.key).filename().string();
    fs::path relp(rel);
    for (auto& part : relp) {
      if (part == ".." || part == ".") {
        throw Error(fmt::format("s3://{}/{}: the key escapes the target directory", u.bucket, o.key),
                    "refusing to write outside the pull directory");
      }
    }
    fs::path dest = fs::path(dir) / relp;
    if (fs::exists(dest, ec) && fs::file_size(dest, ec) == o.size) {
      ++rep.skipped;
      continue;
    }
    std::string part = dest.string() + ".part";
    uint64_t before = fs::exists(part, ec) ? fs::file_size(part, ec) : 0;
    if (before > 0 && before <= o.size) rep.resumed_bytes += before;
    rep.bytes += s3.download(u.bucket, o, dest.string());
    ++rep.objects;
  }
  return rep;
}

}  // namespace ft

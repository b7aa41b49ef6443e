#include "data/objstore/http_client.h"

#include <curl/curl.h>

#include <exception>

#include "util/error.h"

namespace ft {
namespace {

struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
};

struct Ctx {
  HttpResponse* resp;
  const HttpSink* sink;
  std::exception_ptr error;
};

// Headers arrive before the body, so the body callback knows the status: error bodies are kept
// for the server's message, successful ones go to the sink.
size_t on_header(char* p, size_t sz, size_t n, void* ud) {
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
}

size_t on_body(char* p, size_t sz, size_t n, void* ud) {
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
}

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

HttpResponse http_request(const HttpRequest& req, const HttpSink& sink) {
  static CurlGlobal init;
  HttpResponse resp;
  CURL* c = curl_easy_init();
  curl_slist* hl = nullptr;
  for (auto& [k, v] : req.headers) {
    if (k == "host") continue;  // curl sends it from the URL
    hl = curl_slist_append(hl, (k + ": " + v).c_str());
  }
  // No "Expect: 100-continue" round trip before a body: uploads are parts of a few MiB, and
  // proxies (and test fronts) differ in how they answer it.
  if (!req.body.empty()) hl = curl_slist_append(hl, "Expect:");
  Ctx ctx{&resp, &sink, nullptr};
  curl_easy_setopt(c, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  if (req.method == "HEAD") curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  if (!req.body.empty() || req.method == "POST" || req.method == "PUT") {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, req.body.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
  }
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

}  // namespace ft

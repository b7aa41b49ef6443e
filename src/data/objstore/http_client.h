// One HTTP request over libcurl, as the object-store clients (s3.h, gcs.h) need it: the status
// and headers first, then a successful body streamed to a sink (an error body is kept whole, so
// the caller can show the server's own message).
//
//   HttpRequest r{.method = "GET", .url = "http://127.0.0.1:4443/storage/v1/b/corpus/o"};
//   r.headers["authorization"] = "Bearer " + token;
//   HttpResponse resp = http_request(r, [&](const char* p, size_t n) { out.append(p, n); });
//   if (resp.status < 0) ...   // -CURLcode: the connection failed or broke; resp.body says why
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>

namespace ft {

struct HttpRequest {
  std::string method = "GET";
  std::string url;                             // fully encoded
  std::map<std::string, std::string> headers;  // lowercase names; "host" is taken from the URL
  std::string body;                            // request body (POST)
};

struct HttpResponse {
  long status = 0;                             // HTTP status, or -CURLcode when no response came
  std::map<std::string, std::string> headers;  // lowercase names
  std::string body;                            // error bodies, and whole bodies without a sink
};

using HttpSink = std::function<void(const char* data, size_t bytes)>;

// An exception thrown by the sink aborts the transfer and is rethrown here.
HttpResponse http_request(const HttpRequest& req, const HttpSink& sink = nullptr);

// RFC 3986 percent-encoding of everything but unreserved characters (and '/' unless encode_slash).
std::string uri_encode(const std::string& s, bool encode_slash);

}  // namespace ft

// GcsClient's writing half: resumable uploads (chunks of a multiple of 256 KiB, the committed
// offset asked for after a dropped chunk, CRC32C declared and checked), delete, copy, the bucket
// check. See gcs.h.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "data/objstore/crc32c.h"
#include "data/objstore/gcs.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"

namespace ft {
namespace {

using json = nlohmann::json;

// GCS takes a resumable upload's chunks (all but the last) in multiples of 256 KiB.
constexpr uint64_t kChunkQuantum = 256 * 1024;

// What a 308 says the session holds: "Range: bytes=0-N" is N + 1 bytes; no Range, none.
uint64_t committed_bytes(const HttpResponse& r) {
  auto it = r.headers.find("range");
  if (it == r.headers.end()) return 0;
  const size_t dash = it->second.rfind('-');
  if (dash == std::string::npos) return 0;
  return std::strtoull(it->second.c_str() + dash + 1, nullptr, 10) + 1;
}

}  // namespace

void GcsClient::check_bucket(const std::string& bucket) {
  // A listing (storage.objects.list), as the checkpointer needs, not the bucket's metadata
  // (storage.buckets.get, which an account that may write objects often lacks).
  const std::string what = url_of(bucket, "");
  HttpResponse r =
      get_json(what, fmt::format("{}/storage/v1/b/{}/o?maxResults=1", endpoint_, uri_encode(bucket, true)));
  if (r.status == 404)
    throw Error(fmt::format("{}: HTTP 404 notFound: the bucket {} does not exist at {}", what, bucket, endpoint_),
                "create the bucket, or fix the URL (ckpt.dir) and the endpoint (data.endpoint / --gcs-endpoint)");
  if (r.status != 200) fail(what, r);
}

UploadReport GcsClient::put(const std::string& bucket, const std::string& key, const std::string& data) {
  const uint64_t chunk =
      std::max<uint64_t>(kChunkQuantum, (data.size() + kChunkQuantum - 1) / kChunkQuantum * kChunkQuantum);
  return upload(
      bucket, key, data.size(), crc32c(data.data(), data.size()),
      [&](uint64_t off, uint64_t n) { return data.substr(off, n); }, chunk);
}

UploadReport GcsClient::upload_file(const std::string& bucket, const std::string& key, const std::string& path,
                                    const UploadOptions& up) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) throw Error(fmt::format("{}: cannot size for upload: {}", path, ec.message()));
  const uint32_t crc = crc32c_file(path);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("{}: cannot open for upload", path));
  try {
    UploadReport r = upload(
        bucket, key, size, crc, [&](uint64_t off, uint64_t n) { return read_range(fd, path, off, n); }, up.part_bytes);
    ::close(fd);
    return r;
  } catch (...) {
    ::close(fd);
    throw;
  }
}

int64_t GcsClient::committed(const std::string& what, const std::string& session, uint64_t size, HttpResponse* done) {
  HttpRequest q;
  q.method = "PUT";
  q.url = session;
  q.headers["content-range"] = fmt::format("bytes */{}", size);
  HttpResponse r = with_retries(what + " (upload status)", [&] { return send(what, q); });
  if (r.status == 308) return static_cast<int64_t>(committed_bytes(r));
  if (r.status == 200 || r.status == 201) {
    *done = r;
    return -1;
  }
  if (r.status == 404 || r.status == 410)
    throw Error(fmt::format("{}: the resumable upload session is gone (HTTP {})", what, r.status),
                "sessions expire after a week or when cancelled; the upload has to start again");
  fail(what + " (upload status)", r);
}

UploadReport GcsClient::upload(const std::string& bucket, const std::string& key, uint64_t size, uint32_t crc,
                               const ReadRange& read, uint64_t chunk) {
  const double t0 = now_seconds();
  const std::string what = url_of(bucket, key);
  chunk = std::max(kChunkQuantum, chunk / kChunkQuantum * kChunkQuantum);
  const std::string crc_b64 = crc32c_to_base64(crc);
  HttpRequest init;
  init.method = "POST";
  init.url = fmt::format("{}/upload/storage/v1/b/{}/o?uploadType=resumable&name={}", endpoint_,
                         uri_encode(bucket, true), uri_encode(key, true));
  init.headers["content-type"] = "application/json; charset=UTF-8";
  init.headers["x-upload-content-type"] = "application/octet-stream";
  init.headers["x-upload-content-length"] = std::to_string(size);
  init.body =
      json{{"name", key}, {"bucket", bucket}, {"crc32c", crc_b64}, {"contentType", "application/octet-stream"}}.dump();
  HttpResponse r = with_retries(what, [&] { return send(what, init); });
  if (r.status != 200 && r.status != 201) fail(what, r);
  const std::string session = r.headers["location"];
  if (session.empty()) throw Error(fmt::format("{}: the resumable upload was not given a session (no Location)", what));

  UploadReport rep;
  rep.bytes = size;
  uint64_t off = 0;
  int failures = 0;  // in a row, without progress
  double delay = opt_.backoff_s;
  HttpResponse done;
  try {
    for (;;) {
      const uint64_t n = std::min(chunk, size - off);
      HttpRequest put;
      put.method = "PUT";
      put.url = session;
      put.body = n > 0 ? read(off, n) : std::string();
      put.headers["content-range"] = size == 0 ? "bytes */0" : fmt::format("bytes {}-{}/{}", off, off + n - 1, size);
      if (off + n == size) put.headers["x-goog-hash"] = "crc32c=" + crc_b64;
      if (on_chunk) on_chunk(off, failures);
      rep.sent += n;
      ++rep.parts;
      r = send(what, put);
      if (r.status == 200 || r.status == 201) {
        done = r;
        break;
      }
      const uint64_t before = off;
      if (r.status == 308) {
        off = committed_bytes(r);
        if (off > before) {
          failures = 0;
          delay = opt_.backoff_s;
          continue;
        }
      } else if (!retryable_status(r.status)) {
        fail(fmt::format("{} (bytes {}-{})", what, off, off + n), r);
      }
      // Dropped, 5xx, or no progress: ask the session what it kept and go on from there.
      if (failures >= opt_.retries)
        fail(fmt::format("{} (bytes {}-{}, {} attempts)", what, off, off + n, failures + 1), r);
      log_warn("{}: the chunk at byte {} failed ({}); resuming the session from its committed offset in {:.1f}s", what,
               off, r.status < 0 ? r.body : std::to_string(r.status), delay);
      std::this_thread::sleep_for(std::chrono::duration<double>(delay));
      delay *= 2;
      ++failures;
      const int64_t c = committed(what, session, size, &done);
      if (c < 0) break;
      off = static_cast<uint64_t>(c);
    }
  } catch (...) {
    HttpRequest cancel;  // frees the session; GCS answers 499
    cancel.method = "DELETE";
    cancel.url = session;
    send(what, cancel);
    throw;
  }
  // Confirmed as stored: the object the server now holds has the size and CRC32C sent.
  StoreObject o = stat(bucket, key);
  if (o.size != size || (o.crc32c && *o.crc32c != crc)) {
    remove(bucket, key);
    throw Error(fmt::format("{}: the store holds {} bytes with CRC32C {}; {} bytes with CRC32C {} were sent", what,
                            o.size, o.crc32c ? crc32c_to_base64(*o.crc32c) : "(none)", size, crc_b64),
                "the upload was damaged in transit; retry");
  }
  if (!o.crc32c) throw Error(fmt::format("{}: the store reports no CRC32C for the object", what), "check the endpoint");
  rep.etag = crc_b64;
  rep.seconds = now_seconds() - t0;
  return rep;
}

void GcsClient::remove(const std::string& bucket, const std::string& key) {
  const std::string what = url_of(bucket, key);
  HttpResponse r = with_retries(what, [&] {
    HttpRequest req;
    req.method = "DELETE";
    req.url = fmt::format("{}/storage/v1/b/{}/o/{}", endpoint_, uri_encode(bucket, true), uri_encode(key, true));
    return send(what, req);
  });
  if (r.status != 204 && r.status != 200 && r.status != 404) fail(what, r);
}

void GcsClient::copy(const std::string& bucket, const std::string& from_key, const std::string& to_key) {
  const std::string what = url_of(bucket, to_key) + " (copy of " + from_key + ")";
  HttpResponse r = with_retries(what, [&] {
    HttpRequest req;
    req.method = "POST";
    req.url = fmt::format("{}/storage/v1/b/{}/o/{}/copyTo/b/{}/o/{}", endpoint_, uri_encode(bucket, true),
                          uri_encode(from_key, true), uri_encode(bucket, true), uri_encode(to_key, true));
    req.headers["content-type"] = "application/json";
    req.body = "{}";
    return send(what, req);
  });
  if (r.status != 200) fail(what, r);
}

}  // namespace ft

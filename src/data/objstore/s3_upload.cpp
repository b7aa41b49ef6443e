// S3Client's writing half: PutObject, multipart upload (bounded parts in flight, aborted on any
// failure), DeleteObject. See s3.h.
#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "data/objstore/s3.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include "util/strings.h"

namespace ft {
namespace {

std::string md5_raw(const std::string& data) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), d, &n, EVP_md5(), nullptr);
  return std::string(reinterpret_cast<char*>(d), n);
}

std::string unquote(std::string s) {
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  return s;
}

}  // namespace

std::string md5_hex(const std::string& data) {
  return hex_lower(md5_raw(data));
}

std::string md5_base64(const std::string& data) {
  std::string raw = md5_raw(data);
  unsigned char out[32];
  int n = EVP_EncodeBlock(out, reinterpret_cast<const unsigned char*>(raw.data()), static_cast<int>(raw.size()));
  return std::string(reinterpret_cast<char*>(out), static_cast<size_t>(n));
}

void S3Client::check_bucket(const std::string& bucket) {
  const std::string what = url_of(bucket, "");
  HttpResponse r = with_retries(what, [&] {
    return request("GET", bucket, "", {{"list-type", "2"}, {"max-keys", "1"}}, {}, nullptr);
  });
  if (r.status != 200) fail(what, r);
}

UploadReport S3Client::put(const std::string& bucket, const std::string& key, const std::string& data) {
  const double t0 = now_seconds();
  const std::string what = url_of(bucket, key);
  const std::string md5 = md5_hex(data);
  UploadReport rep;
  HttpResponse r = with_retries(what, [&] {
    rep.sent += data.size();
    return request("PUT", bucket, key, {}, {{"content-md5", md5_base64(data)}}, nullptr, data);
  });
  if (r.status != 200) fail(what, r);
  rep.etag = unquote(r.headers["etag"]);
  // A single PUT's ETag is the MD5 of what the server stored: the bytes arrived as sent.
  if (rep.etag != md5)
    throw Error(fmt::format("{}: the server's ETag {} is not the MD5 {} of what was sent", what, rep.etag, md5),
                "the upload was damaged in transit; retry");
  rep.bytes = data.size();
  rep.seconds = now_seconds() - t0;
  return rep;
}

void S3Client::remove(const std::string& bucket, const std::string& key) {
  const std::string what = url_of(bucket, key);
  HttpResponse r = with_retries(what, [&] { return request("DELETE", bucket, key, {}, {}, nullptr); });
  if (r.status != 204 && r.status != 200 && r.status != 404) fail(what, r);
}

void S3Client::copy(const std::string& bucket, const std::string& from_key, const std::string& to_key) {
  const std::string what = url_of(bucket, to_key) + " (copy of " + from_key + ")";
  HttpResponse r = with_retries(what, [&] {
    return request("PUT", bucket, to_key, {}, {{"x-amz-copy-source", "/" + bucket + "/" + uri_encode(from_key, false)}},
                   nullptr);
  });
  // CopyObject can answer 200 with an <Error> body.
  if (r.status != 200 || r.body.find("<Error>") != std::string::npos) {
    if (r.status == 200) r.status = 500;
    fail(what, r);
  }
}

UploadReport S3Client::upload_file(const std::string& bucket, const std::string& key, const std::string& path,
                                   const UploadOptions& up) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("{}: cannot open for upload", path));
  const off_t end = ::lseek(fd, 0, SEEK_END);
  ::close(fd);
  if (end < 0) throw Error(fmt::format("{}: cannot size for upload", path));
  const uint64_t size = static_cast<uint64_t>(end);
  if (size <= up.part_bytes) {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    std::string data;
    try {
      data = read_range(fd, path, 0, size);
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
    return put(bucket, key, data);
  }
  return upload_multipart(bucket, key, path, size, up);
}

std::string S3Client::put_part(const std::string& bucket, const std::string& key, const std::string& upload_id,
                               int part, const std::string& data, uint64_t* sent) {
  const std::string what = fmt::format("{} (part {})", url_of(bucket, key), part);
  const std::string md5 = md5_hex(data), md5_b64 = md5_base64(data);
  int attempt = 0;
  HttpResponse r = with_retries(what, [&] {
    if (on_part) on_part(part, attempt);
    ++attempt;
    *sent += data.size();
    return request("PUT", bucket, key, {{"partNumber", std::to_string(part)}, {"uploadId", upload_id}},
                   {{"content-md5", md5_b64}}, nullptr, data);
  });
  if (r.status != 200) fail(what, r);
  std::string etag = unquote(r.headers["etag"]);
  if (etag != md5)
    throw Error(fmt::format("{}: the server's ETag {} is not the MD5 {} of what was sent", what, etag, md5),
                "the upload was damaged in transit; retry");
  return etag;
}

void S3Client::abort_upload(const std::string& bucket, const std::string& key, const std::string& upload_id) {
  const std::string what = url_of(bucket, key) + " (abort)";
  HttpResponse r = with_retries(what, [&] {
    return request("DELETE", bucket, key, {{"uploadId", upload_id}}, {}, nullptr);
  });
  if (r.status != 204 && r.status != 200 && r.status != 404)
    log_warn(
        "{}: could not abort the multipart upload {} (HTTP {}); its parts stay until a lifecycle rule removes "
        "them",
        url_of(bucket, key), upload_id, r.status);
}

std::vector<S3Client::PendingUpload> S3Client::list_uploads(const std::string& bucket, const std::string& prefix) {
  const std::string what = url_of(bucket, prefix) + " (multipart uploads)";
  std::vector<PendingUpload> out;
  std::map<std::string, std::string> query{{"uploads", ""}, {"prefix", prefix}};
  for (;;) {
    HttpResponse r = with_retries(what, [&] { return request("GET", bucket, "", query, {}, nullptr); });
    if (r.status != 200) fail(what, r);
    for (size_t pos = 0;;) {
      size_t end = std::string::npos;
      const std::string up = s3_xml_tag(r.body, "Upload", pos, &end);
      if (end == std::string::npos) break;
      pos = end;
      out.push_back({s3_xml_tag(up, "Key"), s3_xml_tag(up, "UploadId")});
    }
    if (s3_xml_tag(r.body, "IsTruncated") != "true") break;
    query["key-marker"] = s3_xml_tag(r.body, "NextKeyMarker");
    query["upload-id-marker"] = s3_xml_tag(r.body, "NextUploadIdMarker");
  }
  return out;
}

UploadReport S3Client::upload_multipart(const std::string& bucket, const std::string& key, const std::string& path,
                                        uint64_t size, const UploadOptions& up) {
  const double t0 = now_seconds();
  const std::string what = url_of(bucket, key);
  HttpResponse r = with_retries(what, [&] { return request("POST", bucket, key, {{"uploads", ""}}, {}, nullptr); });
  if (r.status != 200) fail(what, r);
  const std::string upload_id = s3_xml_tag(r.body, "UploadId");
  if (upload_id.empty()) throw Error(fmt::format("{}: CreateMultipartUpload returned no UploadId", what));

  const int parts = static_cast<int>((size + up.part_bytes - 1) / up.part_bytes);
  std::vector<std::string> etags(static_cast<size_t>(parts));
  std::atomic<int> next{1};
  std::atomic<bool> failed{false};
  std::atomic<uint64_t> sent{0};
  std::mutex mu;
  std::exception_ptr error;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    abort_upload(bucket, key, upload_id);
    throw Error(fmt::format("{}: cannot open for upload", path));
  }
  // Each worker holds one part in memory: at most max_in_flight parts are read and sent at once.
  auto worker = [&] {
    for (int p = next++; p <= parts && !failed; p = next++) {
      try {
        const uint64_t off = static_cast<uint64_t>(p - 1) * up.part_bytes;
        const std::string data = read_range(fd, path, off, std::min(up.part_bytes, size - off));
        uint64_t mine = 0;
        etags[static_cast<size_t>(p - 1)] = put_part(bucket, key, upload_id, p, data, &mine);
        sent += mine;
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < std::max(1, std::min(up.max_in_flight, parts)); ++i) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  ::close(fd);
  if (error) {
    abort_upload(bucket, key, upload_id);
    std::rethrow_exception(error);
  }
  std::string body = "<CompleteMultipartUpload>";
  std::string concat;  // the parts' raw MD5s: the multipart ETag is MD5(concat)-parts
  for (int p = 1; p <= parts; ++p) {
    const std::string& e = etags[static_cast<size_t>(p - 1)];
    body += fmt::format("<Part><PartNumber>{}</PartNumber><ETag>\"{}\"</ETag></Part>", p, e);
    for (size_t i = 0; i + 1 < e.size(); i += 2)
      concat.push_back(static_cast<char>(std::stoi(e.substr(i, 2), nullptr, 16)));
  }
  body += "</CompleteMultipartUpload>";
  r = with_retries(what, [&] { return request("POST", bucket, key, {{"uploadId", upload_id}}, {}, nullptr, body); });
  // CompleteMultipartUpload can answer 200 with an <Error> body.
  if (r.status != 200 || r.body.find("<Error>") != std::string::npos) {
    abort_upload(bucket, key, upload_id);
    if (r.status == 200) r.status = 500;
    fail(what, r);
  }
  UploadReport rep;
  rep.bytes = size;
  rep.sent = sent;
  rep.parts = parts;
  rep.etag = unquote(s3_xml_tag(r.body, "ETag"));
  const std::string expect = fmt::format("{}-{}", md5_hex(concat), parts);
  if (!rep.etag.empty() && rep.etag != expect) {
    throw Error(fmt::format("{}: the server's ETag {} is not the {} of the parts sent", what, rep.etag, expect),
                "the upload was damaged in transit; retry");
  }
  rep.seconds = now_seconds() - t0;
  return rep;
}

}  // namespace ft

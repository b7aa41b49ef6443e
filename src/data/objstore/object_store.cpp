#include "data/objstore/object_store.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "data/objstore/crc32c.h"
#include "data/objstore/gcs.h"
#include "data/objstore/pull_path.h"
#include "data/objstore/s3.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/strings.h"

namespace ft {
namespace fs = std::filesystem;
namespace {

std::string md5_file_hex(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
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
  return hex_lower(std::string_view(reinterpret_cast<const char*>(d), dl));
}

void fsync_file(const std::string& path) {
  if (std::FILE* f = std::fopen(path.c_str(), "rb+")) {
    ::fsync(fileno(f));
    std::fclose(f);
  }
}

}  // namespace

bool retryable_status(long status) {
  return status < 0 || status == 429 || status >= 500;
}

std::string byte_range(uint64_t first, uint64_t end) {
  return end > 0 ? fmt::format("bytes={}-{}", first, end - 1) : fmt::format("bytes={}-", first);
}

std::string read_range(int fd, const std::string& path, uint64_t offset, uint64_t n) {
  std::string buf(n, '\0');
  uint64_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd, buf.data() + got, n - got, static_cast<off_t>(offset + got));
    if (r <= 0) throw Error(fmt::format("{}: read failed at byte {}", path, offset + got));
    got += static_cast<uint64_t>(r);
  }
  return buf;
}

HttpResponse ObjectStore::with_retries(const std::string& what, const std::function<HttpResponse()>& attempt) const {
  double delay = opt_.backoff_s;
  for (int i = 0;; ++i) {
    HttpResponse r = attempt();
    if ((r.status >= 200 && r.status < 300) || !retryable_status(r.status) || i >= opt_.retries) return r;
    log_warn("{}: {} — retrying in {:.1f}s", what, r.status < 0 ? r.body : std::to_string(r.status), delay);
    std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    delay *= 2;
  }
}

std::string ObjectStore::get(const std::string& bucket, const std::string& key) {
  StoreObject o = stat(bucket, key);
  std::string body;
  std::string what = url_of(bucket, key);
  HttpResponse r = with_retries(what, [&] {
    body.clear();
    return get_once(bucket, o, 0, 0, [&](const char* p, size_t n) { body.append(p, n); });
  });
  if (r.status < 200 || r.status >= 300) fail(what, r);
  if (body.size() != o.size) {
    throw Error(fmt::format("{}: read {} bytes, the store says {}", what, body.size(), o.size), "retry");
  }
  if (o.crc32c && crc32c(body.data(), body.size()) != *o.crc32c) {
    throw Error(fmt::format("{}: CRC32C of the content does not match the store's", what), "retry");
  }
  return body;
}

uint64_t ObjectStore::get_range(const std::string& bucket, const StoreObject& obj, uint64_t offset, uint64_t n,
                                void* dst) {
  const std::string what = url_of(bucket, obj.key);
  if (offset > obj.size || n > obj.size - offset)
    throw Error(
        fmt::format("{}: bytes [{}, {}) are past the object's end ({} bytes)", what, offset, offset + n, obj.size),
        "the object is shorter than its manifest says: it was replaced or truncated");
  char* out = static_cast<char*>(dst);
  uint64_t have = 0, received = 0;
  double delay = opt_.backoff_s;
  for (int attempt = 0; have < n; ++attempt) {
    uint64_t got = 0;
    HttpResponse r = get_once(bucket, obj, offset + have, offset + n, [&](const char* p, size_t k) {
      const uint64_t take = std::min<uint64_t>(k, n - have - got);  // a server that ignores the end
      std::memcpy(out + have + got, p, take);
      got += take;
      received += k;
    });
    if (r.status == 200 && offset + have > 0)
      throw Error(fmt::format("{}: the server ignored the byte range and sent the whole object", what),
                  "use a store that serves ranged GETs (every S3- and GCS-compatible one does)");
    if (r.status == 412)
      throw Error(fmt::format("{}: the object changed while being read (it is no longer the version listed)", what),
                  "the checkpoint was replaced during the resume; run again");
    if (r.status == 200 || r.status == 206 || r.status < 0) have += got;  // what arrived before a drop counts
    if (have >= n) break;
    if (r.status > 0 && r.status != 200 && r.status != 206 && !retryable_status(r.status)) fail(what, r);
    if (attempt >= opt_.retries) {
      if (r.status == 200 || r.status == 206)
        throw Error(fmt::format("{}: the ranged read keeps ending early at byte {} of [{}, {})", what, offset + have,
                                offset, offset + n),
                    "check the network");
      fail(what, r);
    }
    log_warn("{}: {} — resuming the ranged read at byte {} in {:.1f}s", what,
             r.status < 0     ? r.body
             : r.status < 300 ? std::string("short body")
                              : std::to_string(r.status),
             offset + have, delay);
    std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    delay *= 2;
  }
  return received;
}

uint64_t ObjectStore::download(const std::string& bucket, const StoreObject& obj, const std::string& path) {
  const std::string what = url_of(bucket, obj.key);
  const std::string part = path + ".part";
  std::error_code ec;
  if (auto parent = fs::path(path).parent_path(); !parent.empty()) fs::create_directories(parent, ec);
  uint64_t have = fs::exists(part, ec) ? fs::file_size(part, ec) : 0;
  if (have > obj.size) {
    fs::remove(part, ec);
    have = 0;
  }
  uint64_t fetched = 0;
  double delay = opt_.backoff_s;
  for (int attempt = 0; have < obj.size || (obj.size == 0 && !fs::exists(part, ec)); ++attempt) {
    std::FILE* f = std::fopen(part.c_str(), have ? "ab" : "wb");
    if (!f)
      throw Error(fmt::format("cannot write {}: {}", part, std::strerror(errno)),
                  "check the directory's permissions and free space");
    if (obj.size == 0) {
      std::fclose(f);
      break;
    }
    uint64_t got = 0;
    HttpResponse r;
    try {
      r = get_once(bucket, obj, have, 0, [&](const char* p, size_t n) {
        if (std::fwrite(p, 1, n, f) != n) throw Error(fmt::format("writing {} failed", part), "is the disk full?");
        got += n;
        if (on_progress) on_progress(have + got);
      });
    } catch (...) {
      std::fclose(f);
      throw;
    }
    std::fclose(f);
    if (r.status == 412) {
      throw Error(fmt::format("{}: the object changed while downloading (it is no longer the version listed)", what),
                  "run again: the new version is fetched from the start");
    }
    if (r.status == 200 && have > 0) {
      // The server ignored the Range: the file now holds the old prefix and then the whole object.
      std::ifstream in(part, std::ios::binary);
      in.seekg(static_cast<std::streamoff>(have));
      std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      in.close();
      write_file_atomic(part, body);
      have = 0;
    }
    if (r.status == 200 || r.status == 206) {
      have += got;
      fetched += got;
      if (have >= obj.size) break;
      // A body that ended early without an error (a proxy closing cleanly): continue from here.
    } else if (r.status > 0) {
      fs::resize_file(part, have, ec);  // nothing usable was written on an error status
    } else {
      have = fs::file_size(part, ec);  // keep what arrived before the connection broke
      fetched += got;
    }
    if (r.status > 0 && r.status != 200 && r.status != 206 && !retryable_status(r.status)) fail(what, r);
    if (attempt >= opt_.retries) {
      if (r.status == 200 || r.status == 206)
        throw Error(fmt::format("{}: the transfer keeps ending early at byte {} of {}", what, have, obj.size),
                    "check the network");
      fail(what, r);
    }
    log_warn("{}: {} — resuming from byte {} of {} in {:.1f}s", what,
             r.status < 0     ? r.body
             : r.status < 300 ? std::string("short body")
                              : std::to_string(r.status),
             have, obj.size, delay);
    std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    delay *= 2;
  }
  uint64_t size = fs::exists(part, ec) ? fs::file_size(part, ec) : 0;
  if (size != obj.size) {
    fs::remove(part, ec);
    throw Error(fmt::format("{}: downloaded {} bytes, the listing says {}", what, size, obj.size), "run again");
  }
  if (obj.crc32c) {
    uint32_t got = crc32c_file(part);
    if (got != *obj.crc32c) {
      fs::remove(part, ec);
      throw Error(fmt::format("{}: content CRC32C {} does not match the store's {}", what, crc32c_to_base64(got),
                              crc32c_to_base64(*obj.crc32c)),
                  "the transfer was corrupted; run again");
    }
  }
  if (!obj.md5.empty()) {
    std::string got = md5_file_hex(part);
    if (got != obj.md5) {
      fs::remove(part, ec);
      throw Error(fmt::format("{}: content MD5 {} does not match the {} {}", what, got,
                              scheme_ == "s3" ? "ETag" : "store's md5Hash", obj.md5),
                  "the transfer was corrupted; run again");
    }
  }
  fsync_file(part);
  fs::rename(part, path, ec);
  if (ec) throw Error(fmt::format("rename {} -> {}: {}", part, path, ec.message()));
  return fetched;
}

std::unique_ptr<ObjectStore> open_object_store(const std::string& scheme, const ObjectStoreOptions& opt) {
  if (scheme == "s3") return std::make_unique<S3Client>(opt);
  if (scheme == "gs") return std::make_unique<GcsClient>(opt);
  throw Error(fmt::format("unknown object store \"{}://\"", scheme), "use s3:// or gs://");
}

PullReport object_pull(const std::string& url, const std::string& dir, const ObjectStoreOptions& opt) {
  ObjectUrl u = ObjectUrl::parse(url);
  std::unique_ptr<ObjectStore> store = open_object_store(u.scheme, opt);
  // Listed without a trailing '/' (moto signs the decoded query; every store filters the same), and
  // the listing matches the prefix as a string: s3://b/ds1 lists ds1_flip/ too. The URL names a
  // directory (or one object), so only keys equal to the prefix or below "prefix/" are pulled.
  std::string list_prefix = u.prefix;
  while (!list_prefix.empty() && list_prefix.back() == '/') list_prefix.pop_back();
  std::vector<StoreObject> objs = store->list(u.bucket, list_prefix);
  PullReport rep;
  std::error_code ec;
  fs::create_directories(dir, ec);
  for (const StoreObject& o : objs) {
    const std::optional<std::string> rel = pull_relative_path(u, o.key);
    if (!rel) continue;
    fs::path dest = fs::path(dir) / *rel;
    if (fs::exists(dest, ec) && fs::file_size(dest, ec) == o.size) {
      ++rep.skipped;
      continue;
    }
    std::string part = dest.string() + ".part";
    uint64_t before = fs::exists(part, ec) ? fs::file_size(part, ec) : 0;
    if (before > 0 && before <= o.size) rep.resumed_bytes += before;
    rep.bytes += store->download(u.bucket, o, dest.string());
    ++rep.objects;
  }
  return rep;
}

}  // namespace ft

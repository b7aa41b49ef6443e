#include "ckpt/bucket_storage.h"

#include <ctime>
#include <filesystem>
#include <map>

#include "ckpt/checkpointer.h"  // step_dir_name, parse_step_dir_name
#include "ckpt/ckpt_manifest.h"
#include "data/objstore/gcs.h"
#include "data/objstore/s3.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"

namespace fs = std::filesystem;

namespace ft {
namespace {

// A rank file read in place: ranged GETs of the object, pinned to the version fetch_manifest saw.
template <class Client>
class BucketRankFile final : public RankFileSource {
 public:
  BucketRankFile(Client* client, std::string bucket, StoreObject obj)
      : client_(client), bucket_(std::move(bucket)), obj_(std::move(obj)), url_(client_->url_of(bucket_, obj_.key)) {}
  const std::string& path() const override { return url_; }
  uint64_t size() const override { return obj_.size; }
  void read(uint64_t offset, uint64_t n, void* dst) override {
    fetched_ += client_->get_range(bucket_, obj_, offset, n, dst);
  }
  // Whole chunks, up to 32 MiB a request: few requests, and a bounded buffer per reader.
  uint64_t span_bytes() const override { return 32ull << 20; }
  uint64_t bytes_fetched() const override { return fetched_; }

 private:
  Client* client_;
  std::string bucket_;
  StoreObject obj_;
  std::string url_;
  uint64_t fetched_ = 0;
};

// The store-independent part; Client is S3Client or GcsClient (the same writing calls:
// check_bucket, upload_file, put, stat, remove, copy; the ObjectStore reading ones).
template <class Client>
class BucketStorage : public CheckpointStorage {
 public:
  BucketStorage(const std::string& root, const std::string& run_dir, int rank, std::unique_ptr<Client> client,
                uint64_t part_bytes)
      : CheckpointStorage(root),
        url_(ObjectUrl::parse(root)),
        run_dir_(run_dir),
        rank_(rank),
        client_(std::move(client)) {
    if (part_bytes > 0) upload_.part_bytes = part_bytes;
    while (!url_.prefix.empty() && url_.prefix.back() == '/') url_.prefix.pop_back();
  }
  void check_writable() override { client_->check_bucket(url_.bucket); }

  std::vector<StoredStep> list_steps() override {
    // Listed without a delimiter (see s3.h) and grouped here; the prefix without its '/' keeps
    // '/' out of the query for the one-level prefixes tests use.
    std::map<int64_t, StoredStep> steps;
    const std::string dir = url_.dir_prefix();
    for (const StoreObject& o : client_->list(url_.bucket, url_.prefix)) {
      if (o.key.compare(0, dir.size(), dir) != 0) continue;
      const std::string rest = o.key.substr(dir.size());
      const size_t slash = rest.find('/');
      if (slash == std::string::npos) continue;
      const int64_t step = parse_step_dir_name(rest.substr(0, slash));
      if (step < 0) continue;
      StoredStep& s = steps[step];
      s.step = step;
      s.where = step_url(step);
      if (rest.substr(slash + 1) == kCkptManifestFile) s.committed = true;
    }
    std::vector<StoredStep> out;
    for (auto it = steps.rbegin(); it != steps.rend(); ++it) out.push_back(it->second);
    return out;
  }
  std::string staging_dir(int64_t step) override { return run_dir_ + "/.ckpt-upload/" + step_dir_name(step); }
  PublishReport publish(int64_t step, const std::string& name) override {
    const std::string local = staging_dir(step) + "/" + name, key = step_key(step) + name;
    UploadReport u = client_->upload_file(url_.bucket, key, local, upload_);
    // Confirmed as stored by the client (S3: the ETag is the MD5 of what was sent; GCS: the object's
    // CRC32C is the file's); the size is the file's.
    const uint64_t size = fs::file_size(local);
    StoreObject o = client_->stat(url_.bucket, key);
    if (o.size != size)
      throw Error(fmt::format("{}: the store holds {} bytes, {} were uploaded", client_->url_of(url_.bucket, key),
                              o.size, size));
    std::error_code ec;
    fs::remove(local, ec);
    fs::remove(staging_dir(step), ec);  // when empty (the last rank on this host)
    return {u.bytes, u.seconds};
  }
  void discard_file(int64_t step, const std::string& name) override {
    std::error_code ec;
    fs::remove(staging_dir(step) + "/" + name, ec);
    client_->remove(url_.bucket, step_key(step) + name);
  }
  void discard_step(int64_t step) override {
    // Only what a save writes: the manifest (first), then rank files; nothing else under the step.
    std::vector<std::string> keys;
    for (const StoreObject& o : list_step(step)) {
      const std::string name = o.key.substr(step_key(step).size());
      if (name == kCkptManifestFile)
        keys.insert(keys.begin(), o.key);
      else if (is_rank_file(name))
        keys.push_back(o.key);
    }
    for (const std::string& k : keys) client_->remove(url_.bucket, k);
    std::error_code ec;
    fs::remove_all(staging_dir(step), ec);
  }
  void write_manifest(int64_t step, const std::string& text) override {
    client_->put(url_.bucket, step_key(step) + kCkptManifestFile, text);
  }
  void remove_checkpoint(const StoredStep& s) override {
    std::vector<std::string> files = named_files(s.step);
    client_->remove(url_.bucket, step_key(s.step) + kCkptManifestFile);  // first: it is no checkpoint any more
    for (const std::string& f : files) client_->remove(url_.bucket, step_key(s.step) + f);
  }
  std::string set_aside(const StoredStep& s) override {
    // Copied (what of ours is there: it may be damaged), then removed, manifest first.
    const std::string from = step_key(s.step);
    const std::string to = fmt::format("{}.replaced-{}/", from.substr(0, from.size() - 1), std::time(nullptr));
    std::vector<std::string> names;
    for (const StoreObject& o : list_step(s.step)) {
      const std::string name = o.key.substr(from.size());
      if (name == kCkptManifestFile || is_rank_file(name)) names.push_back(name);
    }
    for (const std::string& n : names) client_->copy(url_.bucket, from + n, to + n);
    discard_step(s.step);
    return client_->url_of(url_.bucket, to);
  }
  std::string fetch(const StoredStep& s) override {
    const std::string dir = fetch_manifest(s);
    for (const auto& [name, o] : stated_) client_->download(url_.bucket, o, dir + "/" + name);
    return dir;
  }
  std::string fetch_manifest(const StoredStep& s) override {
    const std::string dir = cache_dir() + "/" + step_dir_name(s.step);
    std::error_code ec;
    fs::remove_all(dir, ec);
    fs::create_directories(dir);
    stated_.clear();
    stated_step_ = -1;
    const std::string mkey = step_key(s.step) + kCkptManifestFile;
    write_file_atomic(dir + "/" + kCkptManifestFile, client_->get(url_.bucket, mkey));
    // Unauthenticated here: the reader authenticates the manifest and every chunk after this.
    CheckpointManifest m = CheckpointManifest::load(dir, nullptr);
    for (const FileRecord& f : m.files) {
      const std::string key = step_key(s.step) + f.name;
      StoreObject o = client_->stat(url_.bucket, key);  // throws naming the URL when it is missing
      if (o.size != f.file_bytes)
        throw Error(
            fmt::format("{}: {} bytes, the manifest says {}", client_->url_of(url_.bucket, key), o.size, f.file_bytes),
            "the object was replaced or truncated after the checkpoint was committed");
      stated_[f.name] = std::move(o);
    }
    stated_step_ = s.step;
    return dir;
  }
  RankFileOpener opener(const StoredStep& s) override {
    FT_CHECK(stated_step_ == s.step, "opener({}) before fetch_manifest", s.step);
    return [this](const FileRecord& f) -> std::unique_ptr<RankFileSource> {
      auto it = stated_.find(f.name);
      FT_CHECK(it != stated_.end(), "{}: not in the fetched manifest", f.name);
      return std::make_unique<BucketRankFile<Client>>(client_.get(), url_.bucket, it->second);
    };
  }
  void clear_fetched() override {
    std::error_code ec;
    fs::remove_all(cache_dir(), ec);
  }
  bool failure_stops_training() const override { return true; }

 protected:
  std::string step_key(int64_t step) const { return url_.dir_prefix() + step_dir_name(step) + "/"; }
  std::string step_url(int64_t step) const { return client_->url_of(url_.bucket, step_key(step)); }
  std::string cache_dir() const { return fmt::format("{}/.ckpt-cache/rank-{}", run_dir_, rank_); }
  // The objects under a step, listed by the root's prefix (no '/' in the query; see s3.h).
  std::vector<StoreObject> list_step(int64_t step) {
    std::vector<StoreObject> out;
    const std::string k = step_key(step);
    for (StoreObject& o : client_->list(url_.bucket, url_.prefix))
      if (o.key.compare(0, k.size(), k) == 0) out.push_back(std::move(o));
    return out;
  }
  static bool is_rank_file(const std::string& name) {
    return name.rfind("rank-", 0) == 0 && name.size() > 7 && name.compare(name.size() - 7, 7, ".ftckpt") == 0 &&
           name.find('/') == std::string::npos;
  }
  // The files a committed checkpoint's manifest names (rank files only, whatever it says).
  std::vector<std::string> named_files(int64_t step) {
    std::vector<std::string> out;
    try {
      CheckpointManifest m = CheckpointManifest::parse(client_->get(url_.bucket, step_key(step) + kCkptManifestFile),
                                                       step_url(step), nullptr);
      for (const FileRecord& f : m.files)
        if (is_rank_file(f.name)) out.push_back(f.name);
    } catch (const Error& e) {  // a damaged manifest: the rank files under the step are ours
      log_warn("checkpoint: {}: {}; removing its rank files", step_url(step), e.what());
      for (const StoreObject& o : list_step(step)) {
        std::string name = o.key.substr(step_key(step).size());
        if (is_rank_file(name)) out.push_back(name);
      }
    }
    return out;
  }

  ObjectUrl url_;
  std::string run_dir_;
  int rank_;
  UploadOptions upload_;
  std::unique_ptr<Client> client_;
  std::map<std::string, StoreObject> stated_;  // fetch_manifest: the step's rank files, as stat() saw them
  int64_t stated_step_ = -1;
};

// S3: a killed save leaves multipart uploads whose parts are stored (and billed) until aborted.
class S3Storage final : public BucketStorage<S3Client> {
 public:
  using BucketStorage::BucketStorage;
  int clean_orphans(int64_t below_step) override {
    // Listed by the root's prefix (no '/' in the query; see s3.h); only our rank files' uploads.
    int n = 0;
    const std::string dir = url_.dir_prefix();
    for (const S3Client::PendingUpload& u : client_->list_uploads(url_.bucket, url_.prefix)) {
      if (u.key.compare(0, dir.size(), dir) != 0) continue;
      const std::string rest = u.key.substr(dir.size());
      const size_t slash = rest.find('/');
      if (slash == std::string::npos || !is_rank_file(rest.substr(slash + 1))) continue;
      const int64_t step = parse_step_dir_name(rest.substr(0, slash));
      if (step < 0 || step >= below_step) continue;
      client_->abort_upload(url_.bucket, u.key, u.upload_id);
      log_warn("checkpoint: aborted the unfinished upload of {} (a save that was interrupted; upload id {})",
               client_->url_of(url_.bucket, u.key), u.upload_id);
      ++n;
    }
    return n;
  }
};

}  // namespace

std::unique_ptr<CheckpointStorage> open_bucket_storage(const std::string& root, const std::string& run_dir, int rank,
                                                       const std::string& endpoint, uint64_t part_bytes) {
  ObjectStoreOptions o;
  o.s3_endpoint = o.gcs_endpoint = endpoint;
  o.gcs_write = true;
  if (root.rfind("s3://", 0) == 0)
    return std::make_unique<S3Storage>(root, run_dir, rank, std::make_unique<S3Client>(o), part_bytes);
  // GCS: a resumable session that never finished holds no object; nothing to clean.
  return std::make_unique<BucketStorage<GcsClient>>(root, run_dir, rank, std::make_unique<GcsClient>(o), part_bytes);
}

}  // namespace ft

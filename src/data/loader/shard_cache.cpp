#include "data/loader/shard_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "util/error.h"
#include "util/log.h"
#include "util/strings.h"

namespace ft {
namespace fs = std::filesystem;

DatasetManifest load_dataset_manifest(const std::string& path, const ObjectStoreOptions& store) {
  if (!ObjectUrl::is_object_url(path)) return DatasetManifest::load(path);
  ObjectUrl u = ObjectUrl::parse(path);
  auto client = open_object_store(u.scheme, store);
  return DatasetManifest::parse(client->get(u.bucket, u.dir_prefix() + kManifestFile), u.str() + "/" + kManifestFile);
}

ShardCache::ShardCache(const ShardCacheOptions& opt) : opt_(opt), url_(ObjectUrl::parse(opt.url)) {
  std::error_code ec;
  for (int k = 0;; ++k) {  // the first directory no other process holds
    std::string dir = k == 0 ? opt.dir : fmt::format("{}-{}", opt.dir, k);
    fs::create_directories(dir, ec);
    if (ec)
      throw Error(fmt::format("cannot create the data cache {}: {}", dir, ec.message()),
                  "set data.cache_dir to a writable directory");
    int fd = ::open((dir + "/.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
      throw Error(fmt::format("cannot create {}/.lock: {}", dir, std::strerror(errno)),
                  "set data.cache_dir to a writable directory");
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      lock_fd_ = fd;
      opt_.dir = dir;
      break;
    }
    ::close(fd);
    if (k > 1024) throw Error(fmt::format("{}: every cache directory is in use", opt.dir));
  }
  store_ = open_object_store(url_.scheme, opt_.store);
  fetcher_store_ = open_object_store(url_.scheme, opt_.store);
  // Listed without the trailing '/' (moto signs the decoded query; every store filters the same).
  const std::string prefix = url_.dir_prefix();
  std::string list_prefix = prefix;
  if (!list_prefix.empty()) list_prefix.pop_back();
  for (StoreObject& o : store_->list(url_.bucket, list_prefix)) {
    if (o.key.rfind(prefix, 0) != 0) continue;
    std::string rel = o.key.substr(prefix.size());
    if (!rel.empty() && rel.find('/') == std::string::npos) listed_[rel] = std::move(o);
  }
  auto need = [&](const std::string& name) -> const StoreObject& {
    auto it = listed_.find(name);
    if (it == listed_.end()) {
      throw Error(fmt::format("{}{}: not found — {} is not a fluxtrain dataset (or its upload is incomplete)",
                              store_->url_of(url_.bucket, prefix), name, opt_.url),
                  "upload the whole directory that `fluxtrain prepare --out DIR` wrote to this prefix");
    }
    return it->second;
  };
  // The manifest and tokenizer are small and always fetched fresh (they say what the shards are).
  for (const std::string& name : {std::string(kManifestFile)}) {
    std::string local = (fs::path(opt_.dir) / name).string();
    fs::remove(local, ec);
    store_->download(url_.bucket, need(name), local);
  }
  manifest_ = DatasetManifest::load(opt_.dir);
  {
    std::string local = (fs::path(opt_.dir) / manifest_.tokenizer_file).string();
    fs::remove(local, ec);
    store_->download(url_.bucket, need(manifest_.tokenizer_file), local);
  }
  manifest_.check_tokenizer(opt_.dir);
  for (Split split : {Split::kTrain, Split::kValidation}) {
    for (const ShardInfo& s : manifest_.split(split).shards) {
      const StoreObject& o = need(s.file);
      if (o.size != s.bytes) {
        throw Error(fmt::format("{}: the store holds {} bytes, the manifest says {}",
                                store_->url_of(url_.bucket, o.key), o.size, s.bytes),
                    "the upload mixes files of two preparations; upload the prepared directory again");
      }
    }
  }
  // Shards left by an earlier run count against the capacity; they are reused after verification.
  for (Split split : {Split::kTrain, Split::kValidation}) {
    const auto& shards = manifest_.split(split).shards;
    for (size_t i = 0; i < shards.size(); ++i) {
      std::string p = (fs::path(opt_.dir) / shards[i].file).string();
      if (fs::exists(p, ec) && fs::file_size(p, ec) == shards[i].bytes) used_bytes_ += shards[i].bytes;
    }
  }
  fetcher_ = std::thread([this] { fetcher_loop(); });
}

ShardCache::~ShardCache() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (fetcher_.joinable()) fetcher_.join();
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

const ShardInfo& ShardCache::info(const ShardId& id) const {
  const auto& shards = manifest_.split(id.first).shards;
  FT_CHECK(id.second >= 0 && id.second < static_cast<int64_t>(shards.size()), "shard {} of {}", id.second,
           shards.size());
  return shards[static_cast<size_t>(id.second)];
}

std::string ShardCache::local_path(const ShardId& id) const {
  return (fs::path(opt_.dir) / info(id).file).string();
}

uint64_t ShardCache::fetched_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fetched_bytes_;
}

uint64_t ShardCache::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_bytes_;
}

std::shared_ptr<const Shard> ShardCache::fetch(const ShardId& id, ObjectStore& store) {
  const ShardInfo& si = info(id);
  const std::string path = local_path(id);
  const std::string url = store.url_of(url_.bucket, url_.dir_prefix() + si.file);
  std::error_code ec;
  auto open_checked = [&]() {
    auto shard = std::make_shared<const Shard>(path);
    const ShardView& v = shard->view();
    if (v.num_tokens() != si.tokens || v.num_docs() != si.documents || v.header().checksum != si.checksum ||
        v.token_bytes() != manifest_.token_bytes) {
      throw Error(fmt::format("{}: the shard does not match the manifest ({} tokens, {} documents, checksum {}; "
                              "manifest: {}, {}, {})",
                              url, v.num_tokens(), v.num_docs(), hex64(v.header().checksum), si.tokens, si.documents,
                              hex64(si.checksum)),
                  "the upload mixes files of two preparations; upload the prepared directory again");
    }
    if (opt_.verify) v.verify();
    return shard;
  };
  if (fs::exists(path, ec) && fs::file_size(path, ec) == si.bytes) {
    try {
      return open_checked();  // left by an earlier run
    } catch (const Error& e) {
      log_warn("data cache: {} failed its check ({}); fetching it again", path, e.what());
      fs::remove(path, ec);
      std::lock_guard<std::mutex> lock(mu_);
      used_bytes_ -= std::min(used_bytes_, si.bytes);
    }
  }
  uint64_t got = store.download(url_.bucket, listed_.at(si.file), path);
  {
    std::lock_guard<std::mutex> lock(mu_);
    fetched_bytes_ += got;
    used_bytes_ += si.bytes;
  }
  try {
    return open_checked();
  } catch (...) {
    fs::remove(path, ec);
    std::lock_guard<std::mutex> lock(mu_);
    used_bytes_ -= std::min(used_bytes_, si.bytes);
    throw;
  }
}

bool ShardCache::make_room(uint64_t need, const ShardId& keep) {
  while (used_bytes_ + need > opt_.capacity_bytes) {
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      const Entry& e = it->second;
      if (it->first == keep || e.state != Entry::kReady || !e.shard || e.shard.use_count() > 1) continue;
      if (victim == entries_.end() || e.last_use < victim->second.last_use) victim = it;
    }
    if (victim == entries_.end()) {
      // Files of an earlier run that nobody opened yet go next.
      bool removed = false;
      for (Split split : {Split::kTrain, Split::kValidation}) {
        const auto& shards = manifest_.split(split).shards;
        for (size_t i = 0; i < shards.size() && !removed; ++i) {
          ShardId id{split, static_cast<int64_t>(i)};
          if (id == keep || entries_.count(id)) continue;
          std::error_code ec;
          std::string p = local_path(id);
          if (fs::exists(p, ec) && fs::file_size(p, ec) == shards[i].bytes && fs::remove(p, ec)) {
            used_bytes_ -= std::min(used_bytes_, shards[i].bytes);
            removed = true;
          }
        }
      }
      if (!removed) return false;
      continue;
    }
    std::error_code ec;
    fs::remove(local_path(victim->first), ec);  // a mapping held elsewhere stays valid
    used_bytes_ -= std::min(used_bytes_, victim->second.bytes);
    entries_.erase(victim);
  }
  return true;
}

std::shared_ptr<const Shard> ShardCache::shard(Split split, int64_t i) {
  const ShardId id{split, i};
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    Entry& e = entries_[id];
    if (e.state == Entry::kReady) {
      e.last_use = ++clock_;
      return e.shard;
    }
    if (e.state == Entry::kFetching) {
      cv_.wait(lock);
      continue;
    }
    if (!e.error.empty()) throw Error(e.error);
    e.state = Entry::kFetching;
    const uint64_t bytes = info(id).bytes;
    std::error_code ec;
    const bool on_disk = fs::exists(local_path(id), ec) && fs::file_size(local_path(id), ec) == bytes;
    if (!on_disk && !make_room(bytes, id)) {
      log_warn("data cache: {} over data.cache_bytes = {} to fetch {} (every cached shard is in use)",
               human_bytes(static_cast<double>(used_bytes_ + bytes - opt_.capacity_bytes)),
               human_bytes(static_cast<double>(opt_.capacity_bytes)), info(id).file);
    }
    lock.unlock();
    std::shared_ptr<const Shard> s;
    try {
      s = fetch(id, *store_);
    } catch (...) {
      lock.lock();
      entries_.erase(id);
      cv_.notify_all();
      throw;
    }
    lock.lock();
    Entry& done = entries_[id];
    done.state = Entry::kReady;
    done.shard = s;
    done.bytes = bytes;
    done.last_use = ++clock_;
    cv_.notify_all();
    return s;
  }
}

void ShardCache::prefetch(const std::vector<ShardId>& shards) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const ShardId& id : shards) {
      auto it = entries_.find(id);
      if (it != entries_.end() && it->second.state != Entry::kAbsent) continue;
      if (std::find(queue_.begin(), queue_.end(), id) != queue_.end()) continue;
      queue_.push_back(id);
    }
  }
  cv_.notify_all();
}

void ShardCache::fetcher_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    ShardId id = queue_.front();
    queue_.pop_front();
    Entry& e = entries_[id];
    if (e.state != Entry::kAbsent) continue;
    const uint64_t bytes = info(id).bytes;
    std::error_code ec;
    const bool on_disk = fs::exists(local_path(id), ec) && fs::file_size(local_path(id), ec) == bytes;
    // Ahead of use only into free space: evicting is left to the shards needed now.
    if (!on_disk && used_bytes_ + bytes > opt_.capacity_bytes) {
      queue_.clear();
      continue;
    }
    e.state = Entry::kFetching;
    lock.unlock();
    std::shared_ptr<const Shard> s;
    std::string error;
    try {
      s = fetch(id, *fetcher_store_);
    } catch (const std::exception& ex) {
      error = ex.what();  // the loader fetches it again itself and reports the error then
    }
    lock.lock();
    if (s) {
      Entry& done = entries_[id];
      done.state = Entry::kReady;
      done.shard = std::move(s);
      done.bytes = bytes;
    } else {
      log_warn("data cache: fetching ahead failed: {}", error);
      entries_.erase(id);
    }
    cv_.notify_all();
  }
}

}  // namespace ft

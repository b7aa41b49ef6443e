// Training straight from object storage (data.path = "s3://…" or "gs://…"): a rank's local,
// bounded cache of the dataset's shards, fetched ahead of use.
//
// The dataset at the URL is what `fluxtrain prepare` wrote (manifest.json, tokenizer.model,
// *.ftshard), uploaded as is. open() fetches the manifest and the tokenizer into the cache
// directory; shard(i) returns shard i of a split mapped in memory, fetching it first when it is
// not cached (a dropped connection resumes with a ranged GET; a file left by an earlier run is
// reused). Before a shard is used its size and transport checksum (CRC32C / MD5) are checked by
// the store client and its XXH3 checksum and header against the manifest here. prefetch(list)
// fetches shards on a background thread in the order given while they fit; when a new shard
// does not fit, the least recently used shards nobody holds are deleted. fetched_bytes() counts
// the shard bytes this process received (the number in metrics.jsonl and on /metrics).
//
//   ShardCache cache({.url = "gs://corpus/manpages", .dir = "runs/x/data-cache/train-dp0",
//                     .capacity_bytes = 4ull << 30});
//   const DatasetManifest& m = cache.manifest();
//   cache.prefetch({{Split::kTrain, 3}, {Split::kTrain, 4}});
//   std::shared_ptr<const Shard> s = cache.shard(Split::kTrain, 3);   // waits if still in flight
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "data/dataset_manifest.h"
#include "data/loader/loader.h"
#include "data/objstore/object_store.h"
#include "data/shard.h"

namespace ft {

struct ShardCacheOptions {
  std::string url;  // s3://bucket/prefix or gs://bucket/prefix of a prepared dataset
  std::string dir;  // local cache directory (created)
  uint64_t capacity_bytes = uint64_t{4} << 30;
  bool verify = true;  // XXH3 checksum of every fetched or reused shard
  ObjectStoreOptions store;
};

// A prepared dataset's manifest from a directory, or fetched from s3:// / gs:// (only the
// manifest: for `data inspect` and for finding a dataset's languages).
DatasetManifest load_dataset_manifest(const std::string& dir_or_url, const ObjectStoreOptions& store);

class ShardCache {
 public:
  explicit ShardCache(const ShardCacheOptions& opt);  // fetches the manifest and tokenizer
  ~ShardCache();
  ShardCache(const ShardCache&) = delete;
  ShardCache& operator=(const ShardCache&) = delete;

  const DatasetManifest& manifest() const { return manifest_; }
  // Holds manifest.json and the tokenizer too. A directory is used by one process at a time (a
  // lock file): another process given the same one (ranks sharing a dp index under tp or pp)
  // takes "<dir>-1", "<dir>-2", ...
  const std::string& dir() const { return opt_.dir; }

  using ShardId = std::pair<Split, int64_t>;
  // Shard i of a split, fetched (or waited for) when not cached. Throws naming the URL.
  std::shared_ptr<const Shard> shard(Split split, int64_t i);
  // Queues shards for the background fetcher, in this order; shards already cached or queued are skipped.
  void prefetch(const std::vector<ShardId>& shards);
  uint64_t fetched_bytes() const;
  uint64_t cached_bytes() const;

 private:
  struct Entry {
    enum State { kAbsent, kFetching, kReady } state = kAbsent;
    std::shared_ptr<const Shard> shard;
    uint64_t bytes = 0;
    uint64_t last_use = 0;
    std::string error;
  };
  const ShardInfo& info(const ShardId& id) const;
  std::string local_path(const ShardId& id) const;
  // Fetches and verifies one shard (called without the lock held); returns it mapped.
  std::shared_ptr<const Shard> fetch(const ShardId& id, ObjectStore& store);
  // Deletes least recently used, unheld shards until `need` more bytes fit; false when they cannot.
  bool make_room(uint64_t need, const ShardId& keep);
  void fetcher_loop();

  ShardCacheOptions opt_;
  ObjectUrl url_;
  DatasetManifest manifest_;
  std::unique_ptr<ObjectStore> store_, fetcher_store_;  // one per thread
  StoreObject manifest_obj_;
  std::map<std::string, StoreObject> listed_;  // key -> object (sizes, checksums, versions)

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<ShardId, Entry> entries_;
  std::deque<ShardId> queue_;
  uint64_t used_bytes_ = 0, fetched_bytes_ = 0, clock_ = 0;
  bool stop_ = false;
  std::thread fetcher_;
  int lock_fd_ = -1;
};

}  // namespace ft

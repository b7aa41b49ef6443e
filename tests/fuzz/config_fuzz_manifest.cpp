// The config fuzzer's definition of load_dataset_manifest(path, store) (data/loader/shard_cache.h),
// whose product definition opens an object store (HTTP, TLS) that a fuzz run neither links nor
// reaches: a local dataset is read as the product reads it; a bucket URL is refused with one line,
// as an unreachable store would be.
#include <string>

#include "data/dataset_manifest.h"
#include "data/objstore/object_store.h"
#include "util/error.h"

namespace ft {

DatasetManifest load_dataset_manifest(const std::string& path, const ObjectStoreOptions&) {
  if (path.rfind("s3://", 0) == 0 || path.rfind("gs://", 0) == 0)
    throw Error("data.path " + path + ": the config fuzzer has no object store", "fuzz with a local data.path");
  return DatasetManifest::load(path);
}

}  // namespace ft

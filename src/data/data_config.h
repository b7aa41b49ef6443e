// DataConfig (data.*): where training tokens come from.
#pragma once

#include <cstdint>
#include <string>

namespace ft {

class ConfigBinder;

enum class DataSource : uint8_t {
  kSynthetic = 0,  // a deterministic, learnable sequence task (no files)
  kTokenFile = 1,  // a flat file of uint16 or uint32 token ids
  kDataset = 2,    // a dataset directory written by `fluxtrain prepare`
};

struct DataConfig {
  DataSource source = DataSource::kSynthetic;
  std::string path;  // token file (source = "tokens"), dataset directory or s3:// / gs:// URL ("dataset")
  std::string token_dtype = "u16";  // "u16" or "u32" for a flat token file
  double val_fraction = 0.05;       // tail of a token file held out for validation
  int64_t prefetch = 4;             // batches a dataset loader prepares ahead on its own thread
  bool verify = true;               // checksum every dataset shard a rank opens
  // A weighted mixture of prepared datasets or of data.path's languages (data/loader/mixture.h), e.g.
  // "ru=0.5, en=0.5" or "data/web=0.3, data/manpages#ru=0.7"; "" = data.path alone.
  std::string mixture;
  // Training from object storage (path = "s3://…" / "gs://…"):
  std::string endpoint;                    // the store's endpoint; "" = environment / the provider's default
  std::string cache_dir;                   // where each rank caches its shards; "" = <train.run_dir>/data-cache
  int64_t cache_bytes = int64_t{4} << 30;  // per rank and split

  void bind(ConfigBinder& b);
  // data.path and each data.mixture source: a local path, s3:// or gs:// (data/url_scheme.h);
  // called before anything reads them.
  void check_locations() const;
  void validate() const;
};

}  // namespace ft

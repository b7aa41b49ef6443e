#include "data/data_config.h"

#include <algorithm>

#include "data/url_scheme.h"
#include "util/config_binder.h"
#include "util/error.h"

namespace ft {

void DataConfig::bind(ConfigBinder& b) {
  b.add_enum(
      "data.source", &source,
      {{"synthetic", DataSource::kSynthetic}, {"tokens", DataSource::kTokenFile}, {"dataset", DataSource::kDataset}},
      "where tokens come from");
  b.add("data.path", &path,
        "token file (source = \"tokens\"), or a dataset (source = \"dataset\"): a directory made by `fluxtrain "
        "prepare`, or that directory uploaded to s3://bucket/prefix or gs://bucket/prefix (streamed: each rank "
        "fetches only its shards)");
  b.add("data.token_dtype", &token_dtype, "\"u16\" or \"u32\" for a flat token file");
  b.add("data.val_fraction", &val_fraction, "fraction of a token file held out for validation");
  b.add("data.prefetch", &prefetch, "batches a dataset loader prepares ahead on a background thread (0 = none)");
  b.add("data.verify", &verify, "verify the checksum of every dataset shard a rank opens");
  b.add(
      "data.mixture", &mixture,
      "weighted mixture (source = \"dataset\"): \"ru=0.5, en=0.5\" (languages of data.path) or \"DIR_OR_URL[#LANG]=W, "
      "...\"; exact proportions over every train.batch_size x 100 samples; may change at a resume");
  b.add("data.endpoint", &endpoint,
        "object-store endpoint for an s3:// or gs:// data.path (\"\" = AWS_ENDPOINT_URL / STORAGE_EMULATOR_HOST / "
        "the provider's)");
  b.add("data.cache_dir", &cache_dir,
        "local cache of shards streamed from s3:// or gs:// (\"\" = <train.run_dir>/data-cache)");
  b.add("data.cache_bytes", &cache_bytes, "bytes of shards each rank keeps cached per split when streaming");
}

void DataConfig::check_locations() const {
  check_url_scheme(path, "data.path");
  // Each entry of a mixture: "DIR_OR_URL[#LANG]=W" (or "LANG=W": no scheme to check).
  for (size_t begin = 0; begin <= mixture.size();) {
    size_t end = mixture.find(',', begin);
    if (end == std::string::npos) end = mixture.size();
    std::string entry = mixture.substr(begin, end - begin);
    entry = entry.substr(0, std::min(entry.find('='), entry.find('#')));
    const size_t first = entry.find_first_not_of(" \t");
    if (first != std::string::npos) check_url_scheme(entry.substr(first), "data.mixture source");
    begin = end + 1;
  }
}

void DataConfig::validate() const {
  if (source == DataSource::kTokenFile && path.empty())
    throw Error("data.source = \"tokens\" needs data.path", "set data.path = \"FILE\" or --set data.path=FILE");
  if (!mixture.empty() && source != DataSource::kDataset)
    throw Error("data.mixture needs data.source = \"dataset\"", "set data.source = \"dataset\"");
  if (source == DataSource::kDataset && path.empty() && mixture.empty())
    throw Error("data.source = \"dataset\" needs data.path",
                "set data.path = \"DIR\" (made by `fluxtrain prepare --out DIR`)");
  check_locations();
  if (cache_bytes < (int64_t{1} << 20))
    throw Error(fmt::format("data.cache_bytes = {} must be at least 1 MiB", cache_bytes),
                "e.g. data.cache_bytes = 4294967296 (4 GiB)");
  if (prefetch < 0 || prefetch > 1024) throw Error(fmt::format("data.prefetch = {} must be in [0, 1024]", prefetch));
  if (token_dtype != "u16" && token_dtype != "u32")
    throw Error(fmt::format("data.token_dtype = \"{}\" must be \"u16\" or \"u32\"", token_dtype));
  if (!(val_fraction >= 0 && val_fraction < 1))
    throw Error(fmt::format("data.val_fraction = {} must be in [0, 1)", val_fraction));
}

}  // namespace ft

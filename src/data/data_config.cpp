#include "data/data_config.h"

#include "util/config_binder.h"
#include "util/error.h"

namespace ft {

void DataConfig::bind(ConfigBinder& b) {
  b.add_enum("data.source", &source,
             {{"synthetic", DataSource::kSynthetic}, {"tokens", DataSource::kTokenFile}},
             "where tokens come from");
  b.add("data.path", &path, "token file for source = \"tokens\"");
  b.add("data.token_dtype", &token_dtype, "\"u16\" or \"u32\" for a flat token file");
  b.add("data.val_fraction", &val_fraction, "fraction of a token file held out for validation");
}

void DataConfig::validate() const {
  if (source == DataSource::kTokenFile && path.empty())
    throw Error("data.source = \"tokens\" needs data.path", "set data.path = \"FILE\" or --set data.path=FILE");
  if (token_dtype != "u16" && token_dtype != "u32")
    throw Error(fmt::format("data.token_dtype = \"{}\" must be \"u16\" or \"u32\"", token_dtype));
  if (!(val_fraction >= 0 && val_fraction < 1))
    throw Error(fmt::format("data.val_fraction = {} must be in [0, 1)", val_fraction));
}

}  // namespace ft

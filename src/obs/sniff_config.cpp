#include "obs/sniff_config.h"

#include "util/config_binder.h"
#include "util/error.h"

namespace ft {

void SniffConfig::bind(ConfigBinder& b) {
  b.add("obs.sniff_interval", &interval,
        "steps between sniff tests (a fixed GEMM per rank, a fixed exchange per link of every mesh axis; also one "
        "at start-up); 0 = off");
  b.add("obs.sniff_margin", &margin,
        "a rank (GEMM) or link slower than this multiple of its peers' median is named with its host");
}

void SniffConfig::validate() const {
  if (interval < 0 || interval > 1000000)
    throw Error(fmt::format("obs.sniff_interval = {} must be in [0, 1000000] steps", interval),
                "0 turns sniff tests off; e.g. 50 tests every 50 steps");
  if (!(margin > 1 && margin <= 100))
    throw Error(fmt::format("obs.sniff_margin = {} must be in (1, 100]", margin),
                "e.g. 1.5: a rank 50% slower than the median of its peers is named");
}

}  // namespace ft

#include "dist/parallel_config.h"

#include "util/config_binder.h"
#include "util/error.h"

namespace ft {

void ParallelConfig::bind(ConfigBinder& b) {
  b.add("parallel.dp", &dp, "data-parallel degree");
  b.add("parallel.tp", &tp, "tensor-parallel degree");
  b.add("parallel.pp", &pp, "pipeline-parallel degree");
  b.add("parallel.collective_timeout_s", &collective_timeout_s,
        "seconds a rank waits for its peers before stopping with an error naming them");
}

void ParallelConfig::validate() const {
  if (dp <= 0 || tp <= 0 || pp <= 0)
    throw Error(fmt::format("parallel degrees must be positive: dp = {}, tp = {}, pp = {}", dp, tp, pp));
  if (!(collective_timeout_s > 0))
    throw Error(fmt::format("parallel.collective_timeout_s = {} must be > 0", collective_timeout_s));
}

}  // namespace ft

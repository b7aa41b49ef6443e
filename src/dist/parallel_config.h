// ParallelConfig (parallel.*): the layout of ranks. dp × tp × pp must equal the world size.
#pragma once

#include <cstdint>

namespace ft {

class ConfigBinder;

struct ParallelConfig {
  int64_t dp = 1;  // data-parallel replicas
  int64_t tp = 1;  // tensor-parallel ranks (innermost axis)
  int64_t pp = 1;  // pipeline stages (outermost axis)
  double collective_timeout_s = 300;  // bound on every wait for a peer

  void bind(ConfigBinder& b);
  void validate() const;
  int64_t world_size() const { return dp * tp * pp; }
};

}  // namespace ft

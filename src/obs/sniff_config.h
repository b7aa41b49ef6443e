// SniffConfig (obs.sniff_*): the sniff test — a fixed GEMM on every rank and a fixed exchange on
// every link of every mesh axis, timed at start-up and every sniff_interval steps, so that a slow
// GPU/CPU or a slow link is named with its host before it slows the job (obs/sniff.h).
//
//   [obs]
//   sniff_interval = 50     # steps between sniff tests (and one at start-up); 0 = off
//   sniff_margin = 1.5      # slower than margin x the median of its peers = named
#pragma once

#include <cstdint>

namespace ft {

class ConfigBinder;

struct SniffConfig {
  int64_t interval = 0;  // steps; 0 = no sniff tests
  double margin = 1.5;   // a rank or link slower than margin x its peers' median is named

  void bind(ConfigBinder& b);
  void validate() const;
};

}  // namespace ft

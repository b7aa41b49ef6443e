// What the supervisor needs to know about checkpoints before a restart: is there a valid one to
// resume from, and which. It applies the same rule as `fluxtrain train --resume auto`.
//
//   std::optional<ProbedCheckpoint> c = newest_valid_checkpoint(cfg);   // nullopt: none
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "config/config.h"

namespace ft {

struct ProbedCheckpoint {
  std::string dir;
  int64_t step = 0;
};

std::optional<ProbedCheckpoint> newest_valid_checkpoint(const Config& cfg);
// Where checkpoints of this config go (for messages).
std::string checkpoint_root(const Config& cfg);
// Whether the config writes checkpoints at all.
bool checkpoints_enabled(const Config& cfg);

}  // namespace ft

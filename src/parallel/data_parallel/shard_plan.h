// ShardPlan: rank r's piece of every unit. ParamLayout pads each unit to a multiple of the dp
// size P, so unit u splits into P equal pieces of piece_size(u) elements; rank r holds
//   arena [unit_begin(u) + r · piece_size(u), + piece_size(u))
// and stores its pieces back to back in compact shard buffers at shard_offset(u).
#pragma once

#include <cstdint>
#include <vector>

#include "model/param_layout.h"

namespace ft {

class ShardPlan {
 public:
  ShardPlan(const ParamLayout& layout, int rank, int size);

  int num_units() const { return static_cast<int>(piece_.size()); }
  int64_t piece_size(int u) const { return piece_[static_cast<size_t>(u)]; }
  int64_t piece_begin(int u) const { return begin_[static_cast<size_t>(u)]; }  // arena offset
  int64_t shard_offset(int u) const { return offset_[static_cast<size_t>(u)]; }
  int64_t shard_size() const { return total_; }
  // Arena ranges [begin, end) of this rank's pieces, in unit order.
  std::vector<std::pair<int64_t, int64_t>> ranges() const;

 private:
  std::vector<int64_t> piece_, begin_, offset_;
  int64_t total_ = 0;
};

}  // namespace ft

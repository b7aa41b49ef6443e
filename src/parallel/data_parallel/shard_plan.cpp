#include "parallel/data_parallel/shard_plan.h"

#include "util/error.h"

namespace ft {

ShardPlan::ShardPlan(const ParamLayout& layout, int rank, int size) {
  for (int u = 0; u < layout.num_units(); ++u) {
    FT_CHECK(layout.unit_size(u) % size == 0, "unit {} of {} elements is not padded to {} ranks", u,
             layout.unit_size(u), size);
    int64_t piece = layout.unit_size(u) / size;
    piece_.push_back(piece);
    begin_.push_back(layout.unit_begin(u) + rank * piece);
    offset_.push_back(total_);
    total_ += piece;
  }
}

std::vector<std::pair<int64_t, int64_t>> ShardPlan::ranges() const {
  std::vector<std::pair<int64_t, int64_t>> r;
  for (size_t u = 0; u < piece_.size(); ++u) r.emplace_back(begin_[u], begin_[u] + piece_[u]);
  return r;
}

}  // namespace ft

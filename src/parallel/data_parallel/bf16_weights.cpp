#include "parallel/data_parallel/bf16_weights.h"

#include <algorithm>

#include "kernels/ops.h"

namespace ft {

void Bf16Weights::enable(const ExecContext& ctx, const ParamLayout& layout) {
  ctx_ = ctx;
  layout_ = &layout;
  arena_ = Tensor::zeros({layout.total()}, DType::kBF16, MemCategory::kParameters, ctx.device);
  version_.assign(static_cast<size_t>(layout.num_units()), -1);
}

const uint16_t* Bf16Weights::unit(int u, const float* weights, int64_t version) {
  uint16_t* copy = arena() + layout_->unit_begin(u);
  int64_t& v = version_[static_cast<size_t>(u)];
  if (v != version) {
    ops::to_bf16(ctx_, copy, weights, layout_->unit_size(u));
    v = version;
  }
  return copy;
}

void Bf16Weights::mark_current(int64_t version) {
  version_.assign(version_.size(), version);
}

}  // namespace ft

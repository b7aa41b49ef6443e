#include "parallel/tensor_parallel/tensor_parallel.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"

namespace ft {

// Row statistics in double: max over ranks, then the sum of exp(lse_r - max) and of the
// target logit (non-zero on the one rank that holds the target).
void TpGroup::combine_xent_rows(float* lse, float* target_logit, int64_t n) {
  if (!stats_.defined() || stats_.numel() < 3 * n)
    stats_ = Tensor::empty({3 * n}, DType::kF64, MemCategory::kCommunication, ctx_.device);
  double* mx = stats_.data<double>();
  double* sums = mx + n;  // (2n): exp sums, then target logits
  ops::xent_combine_max(ctx_, mx, lse, n);
  on_stream(tp_.all_reduce_async(mx, n, ReduceOp::kMax));
  ops::xent_combine_sums(ctx_, sums, lse, target_logit, mx, n);
  on_stream(tp_.all_reduce_async(sums, 2 * n, ReduceOp::kSum));
  ops::xent_combine_finish(ctx_, lse, target_logit, mx, sums, n);
}

TpGradSync::TpGradSync(const ExecContext& ctx, const ParamLayout& layout, Communicator& tp) : ctx_(ctx), tp_(tp) {
  const int U = layout.num_units();
  slots_.resize(static_cast<size_t>(U));
  buffer_size_.assign(static_cast<size_t>(U), 0);
  // Counted ranges: the whole arena minus the replicated pieces another rank counts.
  std::vector<std::pair<int64_t, int64_t>> skipped;
  for (const ParamSpec& p : layout.specs()) {
    if (!ParamLayout::tp_counts(p, tp.rank())) skipped.push_back({p.offset, p.offset + p.numel()});
    if (!p.tp_partial_grad || tp.size() == 1) continue;
    auto u = static_cast<size_t>(p.unit);
    const int64_t local = p.offset - layout.unit_begin(p.unit);
    if (p.tp_replicas == tp.size()) {  // every rank holds it: sum in place
      slots_[u].push_back({local, p.numel(), buffer_size_[u]});
      buffer_size_[u] += p.numel();
    } else {  // a subset holds it: each piece sits at its own place in a global-size slot
      int64_t row = 1;
      for (size_t d = static_cast<size_t>(p.split_dim) + 1; d < p.shape.size(); ++d) row *= p.shape[d];
      FT_CHECK(p.split_dim == 0, "partial tensor-parallel gradients split along dim {}", p.split_dim);
      slots_[u].push_back({local, p.numel(), buffer_size_[u] + p.split_offset * row});
      buffer_size_[u] += shape_numel(p.global_shape);
    }
  }
  std::sort(skipped.begin(), skipped.end());
  int64_t at = 0;
  for (auto [b, e] : skipped) {
    if (b > at) counted_.push_back({at, b});
    at = std::max(at, e);
  }
  if (at < layout.total()) counted_.push_back({at, layout.total()});
}

void TpGradSync::sum_partial(float* unit_grads, int unit) {
  const auto u = static_cast<size_t>(unit);
  if (slots_[u].empty()) return;
  const ExecContext& ctx = ctx_;
  const Device dev = ctx.device;
  if (!buffer_.defined() || buffer_.numel() < buffer_size_[u])
    buffer_ = Tensor::empty({buffer_size_[u]}, DType::kF32, MemCategory::kCommunication, dev);
  float* buf = buffer_.data<float>();
  // The pieces at their slots, zeros between them (other ranks' pieces of a partly held tensor).
  mem_zero(ctx, buf, dev, static_cast<size_t>(buffer_size_[u]) * sizeof(float));
  for (const Slot& s : slots_[u])
    mem_copy(ctx, buf + s.at, dev, unit_grads + s.local, dev, static_cast<size_t>(s.count) * sizeof(float));
  tp_.all_reduce_async(buf, buffer_size_[u])->stream_wait(ctx);  // the copies back follow it on the stream
  for (const Slot& s : slots_[u])
    mem_copy(ctx, unit_grads + s.local, dev, buf + s.at, dev, static_cast<size_t>(s.count) * sizeof(float));
}

void TpGradSync::sum_squares(const ExecContext& ctx, double* sum, const float* grads, int64_t begin,
                             int64_t end) const {
  for (auto [b, e] : counted_) {
    int64_t lo = std::max(b, begin), hi = std::min(e, end);
    if (lo < hi) ops::sum_squares(ctx, sum, grads + (lo - begin), hi - lo);
  }
}

double TpGradSync::all_reduce(double s) {
  if (tp_.size() > 1) tp_.all_reduce(&s, 1);
  return s;
}

}  // namespace ft

#include "parallel/data_parallel/buffer_pool.h"

namespace ft {

Tensor BufferPool::acquire(int64_t n) {
  // Smallest free buffer that fits.
  size_t best = free_.size();
  for (size_t i = 0; i < free_.size(); ++i)
    if (free_[i].numel() >= n && (best == free_.size() || free_[i].numel() < free_[best].numel())) best = i;
  if (best < free_.size()) {
    Tensor t = free_[best];
    free_.erase(free_.begin() + static_cast<int64_t>(best));
    return t;
  }
  return Tensor::empty({n}, DType::kF32, cat_, dev_);
}

void BufferPool::release(Tensor t) {
  if (!t.defined()) return;
  // The poison build: the buffer's next user must not find this one's data in it.
  if (mem_poison_build()) mem_fill(ExecContext{.device = t.device()}, t.raw(), t.device(), kPoisonByte, t.nbytes());
  free_.push_back(std::move(t));
}

}  // namespace ft

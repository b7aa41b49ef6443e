#include "train/pinned_batch.h"

#include "tensor/device_runtime.h"
#include "tensor/memory.h"

namespace ft {

PinnedBatch::~PinnedBatch() {
  mem_free_host(ctx_.device, host_, bytes_, MemCategory::kActivations);
}

const int32_t* PinnedBatch::stage(const Batch& b) {
  if (ctx_.on_host()) return b.tokens.data();
  const size_t bytes = b.tokens.size() * sizeof(int32_t);
  if (bytes > bytes_) {
    synchronize(ctx_);  // the old buffer's copies have finished
    mem_free_host(ctx_.device, host_, bytes_, MemCategory::kActivations);
    host_ = static_cast<int32_t*>(mem_alloc_host(ctx_.device, bytes, MemCategory::kActivations));
    bytes_ = bytes;
  }
  mem_copy(cpu_context(), host_, Device::kCPU, b.tokens.data(), Device::kCPU, bytes);
  return host_;
}

}  // namespace ft

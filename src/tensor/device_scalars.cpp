#include "tensor/device_scalars.h"

#include "util/error.h"

namespace ft {

DeviceScalars::DeviceScalars(const ExecContext& ctx, int64_t n)
    : ctx_(ctx), values_(Tensor::zeros({n}, DType::kF64, MemCategory::kWorkspace, ctx.device)) {}

DeviceScalars DeviceScalars::slice(int64_t offset, int64_t n) const {
  FT_CHECK(offset >= 0 && n >= 0 && offset + n <= size(), "device scalars [{}, {}) of {}", offset, offset + n, size());
  DeviceScalars part;
  part.ctx_ = ctx_;
  part.values_ = values_.slice(offset, offset + n);
  return part;
}

double* DeviceScalars::at(int64_t i) {
  FT_CHECK(i >= 0 && i < size(), "device scalar {} of {}", i, size());
  return values_.data<double>() + i;
}

void DeviceScalars::zero() {
  mem_zero(ctx_, values_.raw(), values_.device(), values_.nbytes());  // on ctx_'s stream
}

std::vector<double> DeviceScalars::read_back() const {
  std::vector<double> host(static_cast<size_t>(size()));
  if (!host.empty()) mem_copy(ctx_, host.data(), Device::kCPU, values_.raw(), values_.device(), values_.nbytes());
  return host;
}

double DeviceScalars::read_back_sum() const {
  double sum = 0;
  for (double v : read_back()) sum += v;
  return sum;
}

}  // namespace ft

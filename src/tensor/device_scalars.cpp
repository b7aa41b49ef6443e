#include "tensor/device_scalars.h"

#include <cstring>

#include "util/error.h"

namespace ft {

DeviceScalars::DeviceScalars(const ExecContext& ctx, int64_t n)
    : ctx_(ctx), values_(Tensor::zeros({n}, DType::kF64, MemCategory::kWorkspace, ctx.device)) {}

double* DeviceScalars::at(int64_t i) {
  FT_CHECK(i >= 0 && i < size(), "device scalar {} of {}", i, size());
  return values_.data<double>() + i;
}

void DeviceScalars::zero() {
  values_.zero_();
}

std::vector<double> DeviceScalars::read_back() const {
  std::vector<double> host(static_cast<size_t>(size()));
  if (!host.empty()) std::memcpy(host.data(), values_.data<double>(), host.size() * sizeof(double));
  return host;
}

}  // namespace ft

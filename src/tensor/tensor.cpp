#include "tensor/tensor.h"

#include "util/error.h"

namespace ft {

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

Tensor Tensor::empty(Shape shape, DType dtype, MemCategory cat, Device dev) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.dtype_set_ = true;
  t.device_ = dev;
  size_t bytes = t.nbytes();
  if (bytes > 0) {
    void* p = mem_alloc(dev, bytes, cat);
    t.owner_ = std::shared_ptr<void>(p, [dev, bytes, cat](void* q) { mem_free(dev, q, bytes, cat); });
    t.data_ = p;
  }
  return t;
}

Tensor Tensor::zeros(Shape shape, DType dtype, MemCategory cat, Device dev) {
  Tensor t = empty(std::move(shape), dtype, cat, dev);
  t.zero_();
  return t;
}

Tensor Tensor::borrow(void* data, Shape shape, DType dtype, Device dev) {
  Tensor t;
  t.data_ = data;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.dtype_set_ = true;
  t.device_ = dev;
  return t;
}

Tensor Tensor::meta(Shape shape, DType dtype) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.dtype_set_ = true;
  return t;
}

int64_t Tensor::size(int dim) const {
  if (dim < 0) dim += ndim();
  FT_CHECK(dim >= 0 && dim < ndim(), "dim {} out of range for {}", dim, str());
  return shape_[static_cast<size_t>(dim)];
}

Tensor Tensor::slice(int64_t begin, int64_t end) const {
  FT_CHECK(ndim() >= 1 && 0 <= begin && begin <= end && end <= shape_[0], "slice [{}, {}) of {}", begin, end, str());
  Tensor t = *this;
  t.shape_[0] = end - begin;
  int64_t row = shape_[0] == 0 ? 0 : numel() / shape_[0];
  if (data_) t.data_ = static_cast<char*>(data_) + begin * row * static_cast<int64_t>(dtype_size(dtype_));
  return t;
}

Tensor Tensor::reshape(Shape shape) const {
  FT_CHECK(shape_numel(shape) == numel(), "reshape {} to {}", str(), shape_str(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

void Tensor::zero_() {
  if (data_) mem_zero(ExecContext{.device = device_}, data_, device_, nbytes());
}

void Tensor::copy_from(const Tensor& src) {
  FT_CHECK(src.numel() == numel(), "copy {} into {}", src.str(), str());
  if (src.dtype_ == dtype_) {
    const Device on = device_ == Device::kCPU ? src.device_ : device_;
    mem_copy(ExecContext{.device = on}, data_, device_, src.data_, src.device_, nbytes());
    return;
  }
  FT_CHECK(device_ == Device::kCPU && src.device_ == Device::kCPU, "convert {} on {} into {} on {}", src.str(),
           device_name(src.device_), str(), device_name(device_));
  convert(data_, dtype_, src.data_, src.dtype_, static_cast<size_t>(numel()));
}

std::string Tensor::str() const {
  return std::string(dtype_name(dtype_)) + shape_str(shape_);
}

void Tensor::check_elem_size(size_t bytes) const {
  FT_CHECK(dtype_size(dtype_) == bytes, "{} accessed as {}-byte elements", str(), bytes);
}

}  // namespace ft

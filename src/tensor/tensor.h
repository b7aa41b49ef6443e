// Tensor: a contiguous, typed, shaped view of memory on a device that is either owned
// (allocated through mem_alloc under a MemCategory and freed, zeroed, when the last view goes) or
// borrowed (a view into an arena such as the parameter store). A tensor with a shape and no
// memory is a "meta" tensor: dry runs and planners use them to account sizes without allocating.
//
//   Tensor x = Tensor::empty({B, T, C}, DType::kF32, MemCategory::kActivations);  // on the CPU
//   float* p = x.data<float>();                 // (B, T, C); handed to ops, read by kernels only
//   Tensor row = x.slice(0, b, b + 1);          // a view, no copy
//   Tensor g = Tensor::zeros({n}, DType::kF32, MemCategory::kGradients, Device::kCUDA);  // needs the backend
//
// empty() leaves the contents undefined (0xFF bytes, NaN, in the poison build): use zeros() or
// zero_() where the code reads before it writes.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/memory.h"

namespace ft {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[4, 64]"

class Tensor {
 public:
  Tensor() = default;

  // On a device whose backend registered its memory (the CPU always; else an ft::Error).
  static Tensor empty(Shape shape, DType dtype, MemCategory cat, Device dev = Device::kCPU);
  static Tensor zeros(Shape shape, DType dtype, MemCategory cat, Device dev = Device::kCPU);
  // A view of memory someone else owns (an arena). The caller keeps it alive.
  static Tensor borrow(void* data, Shape shape, DType dtype, Device dev = Device::kCPU);
  // Shape only, no memory.
  static Tensor meta(Shape shape, DType dtype);

  bool defined() const { return dtype_set_; }
  bool is_meta() const { return defined() && data_ == nullptr && numel() > 0; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t size(int dim) const;
  int64_t numel() const { return shape_numel(shape_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }

  void* raw() const { return data_; }
  // Typed access; checks the element size matches T.
  template <typename T>
  T* data() const {
    check_elem_size(sizeof(T));
    return static_cast<T*>(data_);
  }

  // A view of rows [begin, end) along dim 0.
  Tensor slice(int64_t begin, int64_t end) const;
  // Same memory, new shape with the same element count.
  Tensor reshape(Shape shape) const;
  void zero_();                       // on the tensor's device's default stream
  void copy_from(const Tensor& src);  // same numel; any devices for one dtype, host only to convert
  std::string str() const;            // "f32[4, 64]"

 private:
  void check_elem_size(size_t bytes) const;
  std::shared_ptr<void> owner_;  // keeps owned memory alive; empty for borrowed/meta
  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::kF32;
  bool dtype_set_ = false;
  Device device_ = Device::kCPU;
};

}  // namespace ft

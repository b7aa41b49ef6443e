// The cuDNN state a CudaContext owns for SDPA: the cuDNN handle (bound to the context's stream) and
// the frontend graphs built so far, one per shape and direction. Defined by attention_sdpa.cpp
// (or, in a build without cuDNN, attention_sdpa_stub.cpp); created on first use by
// CudaContext::sdpa().
#pragma once

#include <memory>

namespace ft::cuda {

class CudaContext;

class SdpaState {
 public:
  explicit SdpaState(CudaContext& ctx);
  ~SdpaState();
  SdpaState(const SdpaState&) = delete;
  SdpaState& operator=(const SdpaState&) = delete;

  // The cuDNN handle (bound to the context's stream); null in a build without cuDNN.
  void* handle() const;

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ft::cuda

// The cuDNN state a CudaContext owns for SDPA: the cuDNN sub-plugin's state (a cuDNN handle bound to
// the context's stream, and the frontend graphs built so far, one per shape and direction: kept by
// libfluxtrain_cudnn.so, cudnn_plugin_api.h) and the last refusal. Defined by attention_sdpa.cpp;
// created on first use by CudaContext::sdpa(), which loads the sub-plugin (cudnn_load.h).
//
//   if (ctx.sdpa().loaded()) ...   // else the fp32 fallback: cudnn_plugin().error says why
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

  // Whether cuDNN SDPA can be asked: the sub-plugin loaded and made this context's handle.
  bool loaded() const;

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ft::cuda

// attention_forward_lowp / attention_backward_lowp in a build without cuDNN SDPA (cuDNN or its
// frontend headers were not found at configure time): always the fp32 fallback.
#include "backends/cuda/attention_lowp.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/sdpa_state.h"

namespace ft::cuda {

struct SdpaState::Impl {};
SdpaState::SdpaState(CudaContext&) : impl_(std::make_unique<Impl>()) {}
SdpaState::~SdpaState() = default;
void* SdpaState::handle() const {
  return nullptr;
}

bool have_cudnn_sdpa() {
  return false;
}
const char* cudnn_sdpa_missing_reason() {
  return "this build has no cuDNN SDPA (cuDNN or the cuDNN frontend headers were not found when it was configured)";
}

const std::string& sdpa_refusal(CudaContext&) {
  static const std::string reason = cudnn_sdpa_missing_reason();
  return reason;
}

AttentionPath attention_forward_lowp(CudaContext& ctx, uint16_t* out, float* lse, const uint16_t* qkv, int64_t B,
                                     int64_t T, int64_t H, int64_t Hkv, int64_t D, LowPrecision type) {
  attention_forward_fallback(ctx, out, lse, qkv, B, T, H, Hkv, D, type);
  return AttentionPath::kFp32Fallback;
}

AttentionPath attention_backward_lowp(CudaContext& ctx, uint16_t* dqkv, const uint16_t* dout, const uint16_t* qkv,
                                      const uint16_t* out, const float* lse, int64_t B, int64_t T, int64_t H,
                                      int64_t Hkv, int64_t D, LowPrecision type) {
  attention_backward_fallback(ctx, dqkv, dout, qkv, out, lse, B, T, H, Hkv, D, type);
  return AttentionPath::kFp32Fallback;
}

}  // namespace ft::cuda

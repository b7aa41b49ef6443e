// The op list's bf16 attention (attention_forward_bf16, attention_backward_bf16): cuDNN's fused
// attention through attention_*_lowp, which run the fp32 kernels on widened copies where cuDNN
// refuses the shape or is missing. The first refusal of a process is logged once, with cuDNN's
// reason (a missing cuDNN is logged by its loader): bf16 training then runs at the fp32 kernels'
// speed.
#include <mutex>

#include "backends/cuda/cuda_ops.h"
#include "util/log.h"

namespace ft::cuda {

namespace {

void note_fallback(CudaContext& ctx, AttentionPath path, const char* op) {
  if (path != AttentionPath::kFp32Fallback || !have_cudnn_sdpa()) return;
  static std::once_flag once;
  std::call_once(once, [&] {
    log_warn("{}: cuDNN refused the shape ({}); bf16 attention runs on the fp32 kernels (slower)", op,
             sdpa_refusal(ctx));
  });
}

}  // namespace

void attention_forward_bf16(CudaContext& ctx, uint16_t* out, float* lse, const uint16_t* qkv, int64_t B, int64_t T,
                            int64_t H, int64_t Hkv, int64_t D) {
  note_fallback(ctx, attention_forward_lowp(ctx, out, lse, qkv, B, T, H, Hkv, D, LowPrecision::kBF16),
                "attention_forward_bf16");
}

void attention_backward_bf16(CudaContext& ctx, uint16_t* dqkv, const uint16_t* dout, const uint16_t* qkv,
                             const uint16_t* out, const float* lse, int64_t B, int64_t T, int64_t H, int64_t Hkv,
                             int64_t D) {
  note_fallback(ctx, attention_backward_lowp(ctx, dqkv, dout, qkv, out, lse, B, T, H, Hkv, D, LowPrecision::kBF16),
                "attention_backward_bf16");
}

}  // namespace ft::cuda

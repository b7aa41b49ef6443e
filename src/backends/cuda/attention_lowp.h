// The fp32 fallback of the bf16/fp16 attention ops (attention_lowp.cpp): qkv, dout and out are
// widened to fp32 copies in the context's scratch, the fp32 kernels run, and the results are
// rounded back. Used where cuDNN SDPA refuses a shape or is not built.
#pragma once

#include <cstdint>

#include "backends/cuda/cuda_ops.h"

namespace ft::cuda {

void attention_forward_fallback(CudaContext& ctx, uint16_t* out, float* lse, const uint16_t* qkv, int64_t B, int64_t T,
                                int64_t H, int64_t Hkv, int64_t D, LowPrecision type);
void attention_backward_fallback(CudaContext& ctx, uint16_t* dqkv, const uint16_t* dout, const uint16_t* qkv,
                                 const uint16_t* out, const float* lse, int64_t B, int64_t T, int64_t H, int64_t Hkv,
                                 int64_t D, LowPrecision type);

}  // namespace ft::cuda

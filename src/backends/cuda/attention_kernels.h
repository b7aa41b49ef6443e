// Internal entries of attention.cu: for the bf16/fp16 fallback (attention_lowp.cpp), which owns the
// scratch, the backward with its delta buffer (B, H, T floats) passed in rather than taken from
// the context's scratch; for the block attention (attention_block.cu), the delta alone.
#pragma once

#include <cstdint>

namespace ft::cuda {

class CudaContext;

// delta (B, H, T) = rowsum(dout ∘ out) over each head's D values; `op` names the caller on a fault.
void attention_delta(CudaContext& ctx, float* delta, const float* dout, const float* out, int64_t B, int64_t T,
                     int64_t H, int64_t D, const char* op);
// The same from bf16 dout, out (uint16_t bit patterns).
void attention_delta(CudaContext& ctx, float* delta, const uint16_t* dout, const uint16_t* out, int64_t B, int64_t T,
                     int64_t H, int64_t D, const char* op);
void attention_backward_with_delta(CudaContext& ctx, float* delta, float* dqkv, const float* dout, const float* qkv,
                                   const float* out, const float* lse, int64_t B, int64_t T, int64_t H, int64_t Hkv,
                                   int64_t D);

}  // namespace ft::cuda

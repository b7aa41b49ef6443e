// RoPE ("rotate half", Hugging Face LLaMA): one thread per rotated pair of a query or key head,
// in place. The tables are computed on the host (once per model) with the reference's formula
// in double and copied: they are the CPU's to the bit, and a kernel's double sin/cos of angles in
// the thousands takes the slow argument reduction, which needs local memory.
#include <cmath>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/launch.h"
#include "backends/cuda/op_math.h"
#include "backends/cuda/reduce.cuh"

namespace ft::cuda {

namespace {

__global__ void rope_kernel(float* qkv, const float* cos, const float* sin, int64_t B, int64_t T, int64_t H,
                            int64_t Hkv, int64_t D, int64_t pos0, float sign) {
  const int64_t half = D / 2, heads = H + Hkv, row = (H + 2 * Hkv) * D;
  const int64_t n = rope_pairs(B, T, H, Hkv, D);
  for (int64_t i = first_index(blockIdx.x, blockDim.x, threadIdx.x); i < n; i += grid_stride(gridDim.x, blockDim.x)) {
    const int64_t pair = i % half, head = (i / half) % heads, bt = i / (half * heads), t = bt % T;
    float* x = qkv + bt * row + head * D;  // query heads, then key heads
    const int64_t tab = (pos0 + t) * half + pair;
    math::rope_rotate(x + pair, x + pair + half, cos[tab], sin[tab], sign);
  }
}

FT_HD inline float widen(uint16_t x) {
  return math::from_bf16(x);
}

// The bf16 forms: a 2-D grid, (x) the rotated pairs of one token (head · D/2 + pair, 32-bit), (y)
// the tokens; each thread reads its pair from `in` (bf16), rotates in fp32 and writes both
// elements rounded to bf16 — so out may be in. Value heads are copied by rope_values_kernel when
// out is not in.
template <typename In>
__global__ void rope_bf16_kernel(uint16_t* out, const In* in, const float* cos, const float* sin, int64_t BT, int64_t T,
                                 int32_t heads, int32_t half, int32_t row, int64_t pos0, float sign) {
  const int32_t i = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= heads * half) return;
  const int32_t head = i / half, pair = i - head * half, at = head * 2 * half + pair;
  for (int64_t bt = blockIdx.y; bt < BT; bt += gridDim.y) {
    const In* x = in + bt * row;
    uint16_t* y = out + bt * row;
    float a = widen(x[at]), b = widen(x[at + half]);
    const int64_t tab = (pos0 + bt % T) * half + pair;
    math::rope_rotate(&a, &b, cos[tab], sin[tab], sign);
    y[at] = math::to_bf16(a);
    y[at + half] = math::to_bf16(b);
  }
}

template <typename In>
__global__ void rope_values_kernel(uint16_t* out, const In* in, int64_t BT, int64_t H, int64_t Hkv, int64_t D) {
  const int64_t values = Hkv * D, row = (H + 2 * Hkv) * D, n = BT * values;
  for (int64_t i = first_index(blockIdx.x, blockDim.x, threadIdx.x); i < n; i += grid_stride(gridDim.x, blockDim.x)) {
    const int64_t at = (i / values) * row + (H + Hkv) * D + i % values;
    out[at] = math::to_bf16(widen(in[at]));
  }
}

template <typename In>
void apply_bf16(CudaContext& ctx, const char* op, uint16_t* out, const In* in, const float* cos, const float* sin,
                int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D, int64_t pos0, float sign) {
  require(B >= 0 && T >= 0 && H >= 0 && Hkv >= 0 && D >= 2 && D % 2 == 0 && pos0 >= 0, op, "bad sizes",
          {{"B", B}, {"T", T}, {"H", H}, {"Hkv", Hkv}, {"D", D}, {"pos0", pos0}}, "D must be even and >= 2");
  require((H + 2 * Hkv) * D <= kMaxRowElems, op, "a token's q, k and v exceed 2^30 elements", {{"H", H}, {"D", D}});
  if (const int64_t n = rope_pairs(B, T, H, Hkv, D); n > 0) {
    const int64_t half = D / 2;
    const LaunchShape l = row_vector_launch(B * T, (H + Hkv) * half);
    FT_LAUNCH(rope_bf16_kernel, to_dim3(l.grid), to_dim3(l.block), 0, ctx.stream())
    (out, in, cos, sin, B * T, T, static_cast<int32_t>(H + Hkv), static_cast<int32_t>(half),
     static_cast<int32_t>((H + 2 * Hkv) * D), pos0, sign);
    FT_CUDA_CHECK_LAUNCH(ctx, op, {"B", B}, {"T", T}, {"H", H}, {"Hkv", Hkv}, {"D", D}, {"pos0", pos0});
  }
  const int64_t values = B * T * Hkv * D;
  if (static_cast<const void*>(out) == static_cast<const void*>(in) || values == 0) return;
  const LaunchShape l = elementwise_launch(values);
  FT_LAUNCH(rope_values_kernel, to_dim3(l.grid), to_dim3(l.block), 0, ctx.stream())(out, in, B * T, H, Hkv, D);
  FT_CUDA_CHECK_LAUNCH(ctx, op, {"B", B}, {"T", T}, {"H", H}, {"Hkv", Hkv}, {"D", D});
}

void apply(CudaContext& ctx, const char* op, float* qkv, const float* cos, const float* sin, int64_t B, int64_t T,
           int64_t H, int64_t Hkv, int64_t D, int64_t pos0, float sign) {
  require(B >= 0 && T >= 0 && H >= 0 && Hkv >= 0 && D >= 2 && D % 2 == 0 && pos0 >= 0, op, "bad sizes",
          {{"B", B}, {"T", T}, {"H", H}, {"Hkv", Hkv}, {"D", D}, {"pos0", pos0}}, "D must be even and >= 2");
  const int64_t n = rope_pairs(B, T, H, Hkv, D);
  if (n == 0) return;
  const LaunchShape l = elementwise_launch(n);
  FT_LAUNCH(rope_kernel, to_dim3(l.grid), to_dim3(l.block), 0, ctx.stream())
  (qkv, cos, sin, B, T, H, Hkv, D, pos0, sign);
  FT_CUDA_CHECK_LAUNCH(ctx, op, {"B", B}, {"T", T}, {"H", H}, {"Hkv", Hkv}, {"D", D}, {"pos0", pos0});
}

}  // namespace

void rope_forward(CudaContext& ctx, float* qkv, const float* cos, const float* sin, int64_t B, int64_t T, int64_t H,
                  int64_t Hkv, int64_t D, int64_t pos0) {
  apply(ctx, "rope_forward", qkv, cos, sin, B, T, H, Hkv, D, pos0, 1.0f);
}

void rope_backward(CudaContext& ctx, float* dqkv, const float* cos, const float* sin, int64_t B, int64_t T, int64_t H,
                   int64_t Hkv, int64_t D, int64_t pos0) {
  apply(ctx, "rope_backward", dqkv, cos, sin, B, T, H, Hkv, D, pos0, -1.0f);
}

void rope_forward_bf16(CudaContext& ctx, uint16_t* qkv16, const uint16_t* qkv, const float* cos, const float* sin,
                       int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D, int64_t pos0) {
  apply_bf16(ctx, "rope_forward_bf16", qkv16, qkv, cos, sin, B, T, H, Hkv, D, pos0, 1.0f);
}

void rope_backward_bf16(CudaContext& ctx, uint16_t* dqkv16, const uint16_t* dqkv, const float* cos, const float* sin,
                        int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D, int64_t pos0) {
  apply_bf16(ctx, "rope_backward_bf16", dqkv16, dqkv, cos, sin, B, T, H, Hkv, D, pos0, -1.0f);
}

void rope_tables(CudaContext& ctx, float* cos, float* sin, int64_t max_pos, int64_t D, float theta) {
  require(max_pos >= 0 && D >= 2 && D % 2 == 0, "rope_tables", "bad sizes", {{"max_pos", max_pos}, {"D", D}},
          "D must be even and >= 2");
  const int64_t half = D / 2, n = max_pos * half;
  if (n == 0) return;
  std::vector<float> c(static_cast<size_t>(n)), s(static_cast<size_t>(n));
  for (int64_t p = 0; p < max_pos; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double angle = math::rope_angle(p, i, D, static_cast<double>(theta));
      c[static_cast<size_t>(p * half + i)] = static_cast<float>(std::cos(angle));
      s[static_cast<size_t>(p * half + i)] = static_cast<float>(std::sin(angle));
    }
  // From pageable memory: each copy returns once the host buffer has been staged.
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  FT_CUDA_CHECK(cudaMemcpyAsync(cos, c.data(), bytes, cudaMemcpyHostToDevice, ctx.stream()), "rope_tables",
                {"max_pos", max_pos}, {"D", D});
  FT_CUDA_CHECK(cudaMemcpyAsync(sin, s.data(), bytes, cudaMemcpyHostToDevice, ctx.stream()), "rope_tables",
                {"max_pos", max_pos}, {"D", D});
  FT_CUDA_CHECK_QUEUED(ctx, "rope_tables", {"max_pos", max_pos}, {"D", D});
}

}  // namespace ft::cuda

// The fp32 fallback of attention_forward_lowp / attention_backward_lowp (see attention_lowp.h).
#include "backends/cuda/attention_lowp.h"

#include <vector>

#include "backends/cuda/attention_kernels.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.h"

namespace ft::cuda {

namespace {

// Consecutive 256-byte-aligned pieces of the context's scratch.
std::vector<float*> carve(CudaContext& ctx, const char* op, std::initializer_list<int64_t> floats) {
  size_t total = 0;
  for (int64_t n : floats) total += (static_cast<size_t>(n) * sizeof(float) + 255) / 256 * 256;
  char* p = static_cast<char*>(ctx.scratch(total, op));
  std::vector<float*> out;
  for (int64_t n : floats) {
    out.push_back(reinterpret_cast<float*>(p));
    p += (static_cast<size_t>(n) * sizeof(float) + 255) / 256 * 256;
  }
  return out;
}

void widen(CudaContext& ctx, float* y, const uint16_t* x, int64_t n, LowPrecision type) {
  if (type == LowPrecision::kBF16)
    widen_bf16(ctx, y, x, n);
  else
    widen_f16(ctx, y, x, n);
}

void narrow(CudaContext& ctx, uint16_t* y, const float* x, int64_t n, LowPrecision type) {
  if (type == LowPrecision::kBF16)
    to_bf16(ctx, y, x, n);
  else
    to_f16(ctx, y, x, n);
}

}  // namespace

void attention_forward_fallback(CudaContext& ctx, uint16_t* out, float* lse, const uint16_t* qkv, int64_t B, int64_t T,
                                int64_t H, int64_t Hkv, int64_t D, LowPrecision type) {
  check_attention("attention_forward_lowp", B, T, H, Hkv, D);
  const int64_t n_qkv = B * T * (H + 2 * Hkv) * D, n_out = B * T * H * D;
  auto buf = carve(ctx, "attention_forward_lowp", {n_qkv, n_out});
  widen(ctx, buf[0], qkv, n_qkv, type);
  attention_forward(ctx, buf[1], lse, buf[0], B, T, H, Hkv, D);
  narrow(ctx, out, buf[1], n_out, type);
}

void attention_backward_fallback(CudaContext& ctx, uint16_t* dqkv, const uint16_t* dout, const uint16_t* qkv,
                                 const uint16_t* out, const float* lse, int64_t B, int64_t T, int64_t H, int64_t Hkv,
                                 int64_t D, LowPrecision type) {
  check_attention("attention_backward_lowp", B, T, H, Hkv, D);
  require(attention_head_dim_ok(D), "attention_backward_lowp",
          "the fp32 CUDA attention supports head dimensions 1..256", {{"D", D}});
  if (B == 0 || T == 0) return;
  const int64_t n_qkv = B * T * (H + 2 * Hkv) * D, n_out = B * T * H * D;
  auto buf = carve(ctx, "attention_backward_lowp", {n_qkv, n_out, n_out, n_qkv, B * H * T});
  widen(ctx, buf[0], qkv, n_qkv, type);
  widen(ctx, buf[1], out, n_out, type);
  widen(ctx, buf[2], dout, n_out, type);
  attention_backward_with_delta(ctx, buf[4], buf[3], buf[2], buf[0], buf[1], lse, B, T, H, Hkv, D);
  narrow(ctx, dqkv, buf[3], n_qkv, type);
}

}  // namespace ft::cuda

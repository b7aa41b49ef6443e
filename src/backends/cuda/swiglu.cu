// SwiGLU: out = silu(gate) · up over gate_up (N, 2F), one thread per output element.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/launch.h"
#include "backends/cuda/op_math.h"
#include "backends/cuda/reduce.cuh"
#include "backends/cuda/store.cuh"

namespace ft::cuda {

namespace {

template <typename Out>
__global__ void swiglu_forward_kernel(Out* out, const float* gu, int64_t N, int64_t F) {
  const int64_t n_all = N * F;
  for (int64_t i = first_index(blockIdx.x, blockDim.x, threadIdx.x); i < n_all;
       i += grid_stride(gridDim.x, blockDim.x)) {
    const int64_t n = i / F, f = i % F;
    store(out + i, math::swiglu(gu[n * 2 * F + f], gu[n * 2 * F + F + f]));
  }
}

template <typename Out>
__global__ void swiglu_backward_kernel(Out* dgu, const float* dout, const float* gu, int64_t N, int64_t F) {
  const int64_t n_all = N * F;
  for (int64_t i = first_index(blockIdx.x, blockDim.x, threadIdx.x); i < n_all;
       i += grid_stride(gridDim.x, blockDim.x)) {
    const int64_t n = i / F, f = i % F;
    float dg, du;
    math::swiglu_grad(gu[n * 2 * F + f], gu[n * 2 * F + F + f], dout[i], &dg, &du);
    store(dgu + n * 2 * F + f, dg);
    store(dgu + n * 2 * F + F + f, du);
  }
}

template <typename Out>
void forward(CudaContext& ctx, Out* out, const float* gu, int64_t N, int64_t F) {
  require(N >= 0 && F >= 0, "swiglu_forward", "negative size", {{"N", N}, {"F", F}});
  if (N * F == 0) return;
  const LaunchShape l = elementwise_launch(N * F);
  swiglu_forward_kernel<<<to_dim3(l.grid), to_dim3(l.block), 0, ctx.stream()>>>(out, gu, N, F);
  FT_CUDA_CHECK_LAUNCH(ctx, "swiglu_forward", {"N", N}, {"F", F});
}

template <typename Out>
void backward(CudaContext& ctx, Out* dgu, const float* dout, const float* gu, int64_t N, int64_t F) {
  require(N >= 0 && F >= 0, "swiglu_backward", "negative size", {{"N", N}, {"F", F}});
  if (N * F == 0) return;
  const LaunchShape l = elementwise_launch(N * F);
  swiglu_backward_kernel<<<to_dim3(l.grid), to_dim3(l.block), 0, ctx.stream()>>>(dgu, dout, gu, N, F);
  FT_CUDA_CHECK_LAUNCH(ctx, "swiglu_backward", {"N", N}, {"F", F});
}

}  // namespace

void swiglu_forward(CudaContext& ctx, float* out, const float* gate_up, int64_t N, int64_t F) {
  forward(ctx, out, gate_up, N, F);
}
void swiglu_forward_bf16(CudaContext& ctx, uint16_t* out, const float* gate_up, int64_t N, int64_t F) {
  forward(ctx, out, gate_up, N, F);
}
void swiglu_backward(CudaContext& ctx, float* dgate_up, const float* dout, const float* gate_up, int64_t N, int64_t F) {
  backward(ctx, dgate_up, dout, gate_up, N, F);
}
void swiglu_backward_bf16(CudaContext& ctx, uint16_t* dgate_up, const float* dout, const float* gate_up, int64_t N,
                          int64_t F) {
  backward(ctx, dgate_up, dout, gate_up, N, F);
}

}  // namespace ft::cuda

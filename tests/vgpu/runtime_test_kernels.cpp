// vgpu_runtime_test's kernels (compiled as the .cu files are: instrumented host C++ on the SIMT
// executor) and their launchers, which check launches as the CUDA ops do (FT_CUDA_CHECK_LAUNCH).
#include "runtime_test_kernels.h"

#include "backends/cuda/context.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/simt.h"

namespace vgpu_rt {

__global__ void fill_kernel(float* p, int n, float v) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) p[i] = v + static_cast<float>(i);
}

__global__ void twice_kernel(const float* in, float* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = 2.0f * in[i];
}

// Writes one block past the end of p: the executor's bounds check fails it (a device fault).
__global__ void past_end_kernel(float* p, int n) {
  p[n + static_cast<int>(threadIdx.x)] = 1.0f;
}

namespace {
unsigned blocks(int n) {
  return static_cast<unsigned>((n + 127) / 128);
}
}  // namespace

void fill(ft::cuda::CudaContext& c, float* p, int n, float v) {
  FT_LAUNCH(fill_kernel, dim3(blocks(n)), dim3(128), 0, c.stream())(p, n, v);
  FT_CUDA_CHECK_LAUNCH(c, "test_fill", {"n", n});
}

void twice(ft::cuda::CudaContext& c, const float* in, float* out, int n) {
  FT_LAUNCH(twice_kernel, dim3(blocks(n)), dim3(128), 0, c.stream())(in, out, n);
  FT_CUDA_CHECK_LAUNCH(c, "test_twice", {"n", n});
}

void past_end(ft::cuda::CudaContext& c, float* p, int n) {
  FT_LAUNCH(past_end_kernel, dim3(1), dim3(32), 0, c.stream())(p, n);
  FT_CUDA_CHECK_LAUNCH(c, "test_past_end", {"n", n});
}

}  // namespace vgpu_rt

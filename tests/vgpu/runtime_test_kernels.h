// vgpu_runtime_test's kernels, launched on a CudaContext's stream and checked as the CUDA ops
// are (a launch error, and with FT_CUDA_SYNC_CHECK a synchronisation, throw ft::Error naming the
// op: test_fill, test_twice, test_past_end).
//
//   vgpu_rt::fill(ctx, p, n, 1.0f);   // p[i] = 1 + i, queued on ctx.stream()
#pragma once

namespace ft::cuda {
class CudaContext;
}

namespace vgpu_rt {
void fill(ft::cuda::CudaContext& c, float* p, int n, float v);             // p[i] = v + i
void twice(ft::cuda::CudaContext& c, const float* in, float* out, int n);  // out[i] = 2 in[i]
void past_end(ft::cuda::CudaContext& c, float* p, int n);                  // writes p[n .. n + 31]: a fault
}  // namespace vgpu_rt

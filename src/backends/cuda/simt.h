// How the kernels launch and declare shared memory, so that the same .cu files build for the GPU
// (nvcc: plain CUDA) and for the virtual GPU (tests/vgpu: host C++ on the SIMT executor, which
// gives each block its own shared memory and checks it for races and reads of unwritten words).
//
//   FT_LAUNCH(kernel, grid, block, smem, stream)(args...);   // kernel<<<grid, block, smem, stream>>>(args...)
//   FT_SHARED(double, red, kRowThreads / kWarp);             // __shared__ double red[8];
//   FT_DYN_SHARED(float, smem);                              // extern __shared__ float smem[];
#pragma once

#if defined(__CUDACC__)
#define FT_LAUNCH(kernel, grid, block, smem, stream) kernel<<<grid, block, smem, stream>>>
#define FT_SHARED(T, name, n) __shared__ T name[n]
#define FT_DYN_SHARED(T, name) extern __shared__ T name[]
#elif defined(FT_VGPU)
// The static's address names the declaration (one array per declaration and block).
#define FT_LAUNCH(kernel, grid, block, smem, stream)                                                   \
  ::vgpu::launcher(                                                                                    \
      #kernel, __FILE__, __LINE__, grid, block, smem, stream, [=](const auto&... a) { kernel(a...); }, \
      [=](auto t) -> const void* {                                                                     \
        if constexpr (requires { ::vgpu::fn_addr(t, kernel); })                                        \
          return ::vgpu::fn_addr(t, kernel);                                                           \
        else                                                                                           \
          return nullptr;                                                                              \
      }(0))
#define FT_SHARED(T, name, n)  \
  static char name##_vgpu_tag; \
  T* const name = static_cast<T*>(::vgpu::shared_static(&name##_vgpu_tag, sizeof(T) * (n), alignof(T)))
#define FT_DYN_SHARED(T, name) T* const name = static_cast<T*>(::vgpu::shared_dynamic())
#endif

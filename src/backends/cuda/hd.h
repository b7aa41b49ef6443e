// FT_HD marks a function both host and device code use: the per-element math (op_math.h) and the
// launch geometry (launch.h) are compiled by nvcc into the kernels and by g++ into the CPU-side
// tests that check them against ft::ref.
//
//   FT_HD inline float silu(float g) { return g / (1.0f + expf(-g)); }
#pragma once

#if defined(__CUDACC__)
#define FT_HD __host__ __device__
#else
#define FT_HD
#endif

// The virtual GPU's execution model for our CUDA kernels compiled as host C++ (tests/vgpu, never
// in fluxtrain): dim3 and the vector types, threadIdx/blockIdx/blockDim/gridDim, __syncthreads,
// warp shuffles/votes/__syncwarp, shared memory (backends/cuda/simt.h's FT_SHARED), atomics, the
// math intrinsics, and the launch that FT_LAUNCH expands to. Every CUDA thread of a block is a
// fiber of executor.cpp; the kernel TUs are built with -fsanitize=thread so that every load and
// store calls the executor's __tsan_* hooks (its own, not TSan's runtime), which check shared
// memory for races and poison, and global accesses against the registered allocations.
//
//   vgpu::DeviceMemory buf(bytes);          // a registered allocation (bounds-checked)
//   FT_LAUNCH(kernel, grid, block, smem, stream)(args...);   // queued on the stream (null: run now)
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "vgpu/faults.h"

#ifndef FT_VGPU
#define FT_VGPU 1
#endif

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(8) float2 {
  float x, y;
};
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) {
  return {x, y, z, w};
}
inline float2 make_float2(float x, float y) {
  return {x, y};
}
inline uint2 make_uint2(unsigned x, unsigned y) {
  return {x, y};
}
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) {
  return {x, y, z, w};
}

// ---- the CUDA runtime API (tests/vgpu/runtime_sim.cpp: streams, events, the pool, errors) ----
#include "vgpu/runtime_api.h"

namespace vgpu {

// A kernel fault, a race, a barrier not reached by every thread, a bad launch: the message names
// the kernel, the launch site, the block and the threads, and the seed (FT_VGPU_SEED).
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Device memory: [p, p + bytes) becomes a valid target of kernels' global accesses.
void register_memory(const void* p, size_t bytes, const char* what);
void unregister_memory(const void* p);
// Whether [p, p + n) lies inside one registered allocation.
bool in_memory(const void* p, size_t n);
// Called when a launch ends (on the thread that ran it), once per registered allocation (base: its
// start) and kind of access the launch made there, with [lo, hi): from the lowest to the highest
// byte of that kind it touched; a non-null message fails the kernel (runtime_sim.cpp:
// cross-stream races).
using AccessHook = const char* (*)(uintptr_t base, uintptr_t lo, uintptr_t hi, bool write);
void set_access_hook(AccessHook hook);
// A kernel's vector access of `bytes` (8 or 16: float2/uint2, float4/uint4) at p, which a GPU
// faults on unless p is a multiple of `bytes` (simt.h FT_VECTOR_ACCESS; GCC splits the vector
// into scalar accesses, so the load and store hooks cannot see it).
void vector_access(const void* p, size_t bytes);
// A kernel's access of the bytes [p, p + n) checked as the load and store hooks check one (all of
// them inside one allocation; the access hook), for a kernel loop left uninstrumented for speed
// (the emulated GEMM's inner products): one check of the range instead of one per element.
void range_access(const void* p, size_t n, bool write);
class DeviceMemory {
 public:
  explicit DeviceMemory(size_t bytes, const char* what = "buffer");
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  void* get() const { return p_; }
  size_t bytes() const { return bytes_; }

 private:
  void* p_;
  size_t bytes_;
};

// The calling fiber's coordinates (out of line: the executor's state is not instrumented).
uint3 thread_idx();
uint3 block_idx();
uint3 block_dim();
uint3 grid_dim();
void syncthreads(const char* file, int line);
enum WarpOp : int { kShflIdx, kShflXor, kShflUp, kShflDown, kBallot, kAny, kAll, kSyncWarp };
uint64_t warp_op(WarpOp op, unsigned mask, uint64_t value, int arg, int width);
void* shared_static(const void* tag, size_t bytes, size_t align);
void* shared_dynamic();

using ThreadMain = void (*)(void*);
void run_launch(const char* kernel, const char* file, int line, const void* fn, dim3 grid, dim3 block, size_t smem,
                ThreadMain main, void* arg);

// The launch: Body calls the kernel with the arguments (a generic lambda, so that a kernel
// template's arguments are deduced from them as <<<>>> does); fn is its address where the kernel
// expression names one function (for cudaFuncSetAttribute's limit), else null.
template <typename Body, typename... A>
struct KernelArgs {
  const Body* body;
  const std::tuple<A...>* args;
};

// Each fiber's entry: its own copy of the arguments on its own stack (a kernel's parameters are
// per thread), copied bytewise here, outside the instrumented accesses.
template <typename Body, typename... A>
__attribute__((no_sanitize_thread, noinline)) void thread_main(void* p) {
  const auto* k = static_cast<const KernelArgs<Body, A...>*>(p);
  alignas(std::tuple<A...>) unsigned char buf[sizeof(std::tuple<A...>)];
  alignas(Body) unsigned char body[sizeof(Body)];
  __builtin_memcpy(buf, k->args, sizeof buf);
  __builtin_memcpy(body, k->body, sizeof body);
  std::apply(*reinterpret_cast<Body*>(body), *reinterpret_cast<std::tuple<A...>*>(buf));
}

// A launch as queued on its stream: the kernel's arguments and body copied (the caller's frame is
// gone when the stream reaches it), run by run_launch, then freed by `destroy`.
template <typename Body, typename... A>
struct QueuedLaunch {
  Body body;
  std::tuple<A...> args;
  KernelArgs<Body, A...> k{&body, &args};
  static void destroy(void* p) { delete static_cast<QueuedLaunch*>(p); }
};

struct LaunchDesc {
  const char* kernel;
  const char* file;
  int line;
  const void* fn;
  dim3 grid, block;
  size_t smem;
};
// runtime_sim.cpp: onto the stream's queue (the legacy default stream, null, runs it at once and
// a fault there throws vgpu::Error, as the kernel tests expect); destroy(owner) once it has run.
void submit_launch(cudaStream_t stream, const LaunchDesc& d, ThreadMain main, void* arg, void* owner,
                   void (*destroy)(void*));

template <typename Body>
struct Launcher {
  const char* name;
  const char* file;
  int line;
  dim3 grid, block;
  size_t smem;
  cudaStream_t stream;
  const void* fn;
  Body body;
  template <typename... A>
  void operator()(const A&... a) const {
    static_assert((std::is_trivially_copyable_v<A> && ...), "kernel arguments are copied bytewise");
    static_assert(std::is_trivially_copyable_v<Body>);
    auto* q = new QueuedLaunch<Body, A...>{body, std::tuple<A...>(a...)};
    submit_launch(stream, LaunchDesc{name, file, line, fn, grid, block, smem}, &thread_main<Body, A...>, &q->k, q,
                  &QueuedLaunch<Body, A...>::destroy);
  }
};

template <typename Body>
Launcher<Body> launcher(const char* name, const char* file, int line, dim3 grid, dim3 block, size_t smem,
                        cudaStream_t stream, Body body, const void* fn) {
  return {name, file, line, grid, block, smem, stream, fn, body};
}

template <typename Tag, typename R, typename... P>
const void* fn_addr(Tag, R (*f)(P...)) {
  return reinterpret_cast<const void*>(f);
}

template <typename T>
uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
  uint64_t b = 0;
  __builtin_memcpy(&b, &v, sizeof(T));
  return b;
}
template <typename T>
T from_bits(uint64_t b) {
  T v;
  __builtin_memcpy(&v, &b, sizeof(T));
  return v;
}

}  // namespace vgpu

#define threadIdx (::vgpu::thread_idx())
#define blockIdx (::vgpu::block_idx())
#define blockDim (::vgpu::block_dim())
#define gridDim (::vgpu::grid_dim())
#define __syncthreads() ::vgpu::syncthreads(__FILE__, __LINE__)
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  vgpu::warp_op(vgpu::kSyncWarp, mask, 0, 0, 32);
}
template <typename T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  return vgpu::from_bits<T>(vgpu::warp_op(vgpu::kShflIdx, mask, vgpu::to_bits(v), src, width));
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return vgpu::from_bits<T>(vgpu::warp_op(vgpu::kShflXor, mask, vgpu::to_bits(v), lane_mask, width));
}
template <typename T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return vgpu::from_bits<T>(vgpu::warp_op(vgpu::kShflUp, mask, vgpu::to_bits(v), static_cast<int>(delta), width));
}
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return vgpu::from_bits<T>(vgpu::warp_op(vgpu::kShflDown, mask, vgpu::to_bits(v), static_cast<int>(delta), width));
}
inline unsigned __ballot_sync(unsigned mask, int p) {
  return static_cast<unsigned>(vgpu::warp_op(vgpu::kBallot, mask, p != 0, 0, 32));
}
inline int __any_sync(unsigned mask, int p) {
  return static_cast<int>(vgpu::warp_op(vgpu::kAny, mask, p != 0, 0, 32));
}
inline int __all_sync(unsigned mask, int p) {
  return static_cast<int>(vgpu::warp_op(vgpu::kAll, mask, p != 0, 0, 32));
}

// ---- math intrinsics: the IEEE host functions (the fast variants' extra error is not modelled)
inline float __expf(float x) {
  return expf(x);
}
inline float __logf(float x) {
  return logf(x);
}
inline float __fdividef(float a, float b) {
  return a / b;
}
inline float rsqrtf(float x) {
  return 1.0f / sqrtf(x);
}
inline float __fmul_rn(float a, float b) {
  return a * b;
}
inline float __fadd_rn(float a, float b) {
  return a + b;
}
inline float __fsub_rn(float a, float b) {
  return a - b;
}
inline float __fmaf_rn(float a, float b, float c) {
  return fmaf(a, b, c);
}
inline unsigned __float_as_uint(float f) {
  return vgpu::from_bits<unsigned>(vgpu::to_bits(f));
}
inline float __uint_as_float(unsigned u) {
  return vgpu::from_bits<float>(vgpu::to_bits(u));
}

// ---- atomics: blocks run one after another on one OS thread, so plain read-modify-writes -----
template <typename T>
T atomicAdd(T* p, T v) {
  const T old = *p;
  *p = old + v;
  return old;
}
template <typename T>
T atomicMax(T* p, T v) {
  const T old = *p;
  *p = old < v ? v : old;
  return old;
}
template <typename T>
T atomicMin(T* p, T v) {
  const T old = *p;
  *p = v < old ? v : old;
  return old;
}
template <typename T>
T atomicExch(T* p, T v) {
  const T old = *p;
  *p = v;
  return old;
}
template <typename T>
T atomicCAS(T* p, T compare, T v) {
  const T old = *p;
  if (old == compare) *p = v;
  return old;
}

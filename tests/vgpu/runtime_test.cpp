// The CUDA backend's real host code (context.cpp, runtime.cpp, cuda_check.cpp) on the virtual
// runtime (runtime_sim.cpp): streams ordered by events, the stream-ordered pool across streams,
// pinned copies, and the GPU-readiness issue's fault rules (a device fault, then frees that never
// throw; cudaErrorNotReady not left as the last error; a sticky error failing every later call).
//
// Built twice: vgpu_runtime_test, and vgpu_runtime_planted_test with FT_VGPU_RT_FAULTS=1 (a
// stream_wait removed here, a pool free that throws in context.cpp), whose two named tests must
// fail (ctest WILL_FAIL) — the proof that these tests catch those bugs.
#include "backends/cuda/runtime.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/cuda/context.h"
#include "runtime_test_kernels.h"
#include "tensor/device_runtime.h"
#include "tensor/memory.h"
#include "util/error.h"
#include "vgpu/cuda_sim.h"

namespace ft {
namespace {

constexpr int kN = 1000;  // 8 blocks of 128, the last partial

// A launch whose fault may already be seen by its own launch check (cudaGetLastError), when the
// stream's worker ran it before the check, or only by a later call: either is CUDA's behaviour.
template <typename F>
void launch_maybe_reported(F launch) {
  try {
    launch();
  } catch (const Error&) {
  }
}

cuda::CudaContext& cuda_of(const ExecContext& ctx) {
  return *static_cast<cuda::CudaContext*>(ctx.backend);
}

class VgpuRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");  // stream workers are threads
    cuda::register_cuda_backend();
    // The first context of the device: its stream is the memory stream (runtime.h), as a rank's
    // compute context. A later make_exec_context would make a context with a stream of its own.
    static const ExecContext compute = make_exec_context(Device::kCUDA, 0);
    main_ = compute;
    side_ = make_side_context(main_);
  }
  void TearDown() override { vgpu::reset_fault_for_tests(); }

  float* device_floats(int n) {
    return static_cast<float*>(
        mem_alloc(Device::kCUDA, sizeof(float) * static_cast<size_t>(n), MemCategory::kActivations));
  }
  void free_floats(float* p, int n) {
    mem_free(Device::kCUDA, p, sizeof(float) * static_cast<size_t>(n), MemCategory::kActivations);
  }
  std::vector<float> read(const ExecContext& ctx, const float* p, int n) {
    std::vector<float> h(static_cast<size_t>(n));
    mem_copy(ctx, h.data(), Device::kCPU, p, Device::kCUDA, h.size() * sizeof(float));
    return h;
  }

  ExecContext main_, side_;
};

// main fills a, side doubles it into b after stream_wait(side, main); main frees both after
// stream_wait(main, side). Device memory is allocated on main's stream (the memory stream).
TEST_F(VgpuRuntime, EventOrdersTwoStreams) {
  float* a = device_floats(kN);
  float* b = device_floats(kN);
  vgpu_rt::fill(cuda_of(main_), a, kN, 1.0f);
#if !defined(FT_VGPU_RT_FAULTS)  // planted: without it, the cross-stream check must fire
  stream_wait(side_, main_);
#endif
  vgpu_rt::twice(cuda_of(side_), a, b, kN);
  const std::vector<float> got = read(side_, b, kN);
  for (int i = 0; i < kN; ++i) ASSERT_EQ(got[static_cast<size_t>(i)], 2.0f * (1.0f + static_cast<float>(i))) << i;
  stream_wait(main_, side_);
  free_floats(a, kN);
  free_floats(b, kN);
  synchronize(main_);
  EXPECT_STREQ(vgpu::fault_report(), "");
}

// The same without the event: an error naming both kernels and both streams, whichever ran first.
TEST_F(VgpuRuntime, WithoutEventCrossStreamErrorNamesBoth) {
  float* a = device_floats(kN);
  float* b = device_floats(kN);
  synchronize(main_);  // the allocations are ordered before both streams' work
  vgpu_rt::fill(cuda_of(main_), a, kN, 1.0f);
  launch_maybe_reported([&] { vgpu_rt::twice(cuda_of(side_), a, b, kN); });  // no stream_wait(side, main)
  // Found by whichever of the two runs second: a later call on either stream reports it.
  EXPECT_NE(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_THROW(synchronize(side_), Error);
  EXPECT_THROW(synchronize(main_), Error);  // sticky: every later call fails
  const std::string report = vgpu::fault_report();
  EXPECT_NE(report.find("cross-stream race"), std::string::npos) << report;
  EXPECT_NE(report.find("fill_kernel"), std::string::npos) << report;
  EXPECT_NE(report.find("twice_kernel"), std::string::npos) << report;
  const auto first = report.find("on stream "), second = report.find("on stream ", first + 1);
  ASSERT_NE(second, std::string::npos) << report;
  EXPECT_NE(report.substr(first, 12), report.substr(second, 12)) << report;
}

// The race check is per byte range: two streams writing disjoint halves of one allocation with no
// event between do not race (one gradient bucket reduced while the backward pass writes another).
TEST_F(VgpuRuntime, DisjointRangesOfOneAllocationDoNotRace) {
  float* a = device_floats(2 * kN);
  synchronize(main_);  // the allocation is ordered before both streams' work
  vgpu_rt::fill(cuda_of(main_), a, kN, 1.0f);
  vgpu_rt::fill(cuda_of(side_), a + kN, kN, 2.0f);  // no stream_wait: the bytes differ
  stream_wait(main_, side_);
  const std::vector<float> got = read(main_, a, 2 * kN);
  EXPECT_EQ(got[0], 1.0f);
  EXPECT_EQ(got[kN], 2.0f);
  free_floats(a, 2 * kN);
  synchronize(main_);
  EXPECT_STREQ(vgpu::fault_report(), "");
}

// Overlapping ranges still race, and the report names the bytes both touch: main writes floats
// [0, kN), side reads [kN/2, kN + kN/2) of the same allocation.
TEST_F(VgpuRuntime, OverlappingRangesRaceNamingTheBytes) {
  float* a = device_floats(2 * kN);
  float* b = device_floats(kN);
  synchronize(main_);
  vgpu_rt::fill(cuda_of(main_), a, kN, 1.0f);
  launch_maybe_reported([&] { vgpu_rt::twice(cuda_of(side_), a + kN / 2, b, kN); });
  EXPECT_NE(cudaDeviceSynchronize(), cudaSuccess);
  const std::string report = vgpu::fault_report();
  EXPECT_NE(report.find("cross-stream race"), std::string::npos) << report;
  EXPECT_NE(report.find(fmt::format("bytes [{}, {})", kN / 2 * 4, kN * 4)), std::string::npos) << report;
}

// Memory freed on one stream (zeroed first, as pool_free does) is reused by an allocation on
// another stream: the same block, ordered after the free (zeros, no race).
TEST_F(VgpuRuntime, FreedOnOneStreamReusedOnAnother) {
  cuda::CudaContext& m = cuda_of(main_);
  cuda::CudaContext& s = cuda_of(side_);
  const size_t bytes = 4096 + 512;  // a size no other test frees
  auto* p = static_cast<float*>(cuda::pool_alloc(0, bytes, m.stream()));
  ASSERT_NE(p, nullptr);
  vgpu_rt::fill(m, p, kN, 5.0f);
  cuda::pool_free(p, bytes, m.stream());
  auto* q = static_cast<float*>(cuda::pool_alloc(0, bytes, s.stream()));
  EXPECT_EQ(q, p);  // reused at once, on another stream
  std::vector<float> h(kN, -1.0f);
  ASSERT_EQ(cudaMemcpyAsync(h.data(), q, kN * sizeof(float), cudaMemcpyDeviceToHost, s.stream()), cudaSuccess);
  for (int i = 0; i < kN; ++i) ASSERT_EQ(h[static_cast<size_t>(i)], 0.0f) << i;  // the free's zeros
  vgpu_rt::fill(s, q, kN, 7.0f);
  const std::vector<float> got = read(side_, q, kN);
  EXPECT_EQ(got[3], 10.0f);
  cuda::pool_free(q, bytes, s.stream());
  s.synchronize();
  EXPECT_STREQ(vgpu::fault_report(), "");
}

// Work another stream queued on a buffer must be joined into the memory stream before the buffer
// is freed (runtime.h): without stream_wait(main, side) the free (or its zeroing) is reported.
TEST_F(VgpuRuntime, FreeWithoutJoinIsReported) {
  float* a = device_floats(kN);
  float* b = device_floats(kN);
  vgpu_rt::fill(cuda_of(main_), a, kN, 1.0f);
  stream_wait(side_, main_);
  vgpu_rt::twice(cuda_of(side_), a, b, kN);
  free_floats(a, kN);  // no stream_wait(main, side)
  EXPECT_NE(cudaDeviceSynchronize(), cudaSuccess);
  const std::string report = vgpu::fault_report();
  EXPECT_NE(report.find("twice_kernel"), std::string::npos) << report;
  vgpu::reset_fault_for_tests();
  stream_wait(main_, side_);
  free_floats(b, kN);
}

// FT_CUDA_SYNC_CHECK=1 semantics after a device fault: the op that faulted throws one error naming
// it; every later free (mem_free, a context's scratch and workspace in its destructor) fails
// quietly, noted once, and never throws (a throw there would end the process: noexcept). In a
// child process: a sticky fault cannot be undone in CUDA. The op's error comes from its launch
// check's cudaGetLastError or its synchronisation, whichever sees the fault first (as on a GPU).
TEST_F(VgpuRuntime, DeviceFaultThenFreesNeverThrow) {
  EXPECT_EXIT(
      {
        cuda::CudaContext& m = cuda_of(main_);
        m.set_sync_check(true);
        float* a = device_floats(kN);
        auto side = std::make_unique<ExecContext>(make_side_context(main_));
        cuda_of(*side).scratch(1 << 10, "test");  // freed by the side context's destructor
        try {
          vgpu_rt::past_end(m, a, kN);
          std::exit(2);  // the fault must be reported by the op
        } catch (const Error& e) {
          std::fprintf(stderr, "%s\n", e.what());
        }
        free_floats(a, kN);
        side.reset();
        if (mem_free_failures() < 1) std::exit(3);
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "CUDA op test_past_end \\(n=1000\\): .* failed at .*cudaErrorIllegalAddress");
}

// A host function holds the stream, so the events after it are deterministically not reached.
struct Gate {
  std::atomic<bool> open{false};
  static void wait(void* p) {
    while (!static_cast<Gate*>(p)->open.load()) std::this_thread::yield();
  }
};

// cudaEventQuery and cudaEventElapsedTime answer cudaErrorNotReady and leave it as the thread's
// last error; the stream timer (runtime.cpp's mark_seconds) must clear it, or the next launch
// check reports it as that kernel's failure.
TEST_F(VgpuRuntime, NotReadyIsNotLeftAsLastError) {
  const DeviceRuntime* rt = stream_mark_runtime(main_);
  ASSERT_NE(rt, nullptr);
  cuda::CudaContext& m = cuda_of(main_);
  Gate gate;
  ASSERT_EQ(cudaLaunchHostFunc(m.stream(), Gate::wait, &gate), cudaSuccess);
  void* from = rt->record_mark(main_, nullptr);
  void* to = rt->record_mark(main_, nullptr);
  EXPECT_EQ(cudaEventQuery(static_cast<cudaEvent_t>(to)), cudaErrorNotReady);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorNotReady);  // the runtime's rule the callers must clear
  EXPECT_EQ(cudaGetLastError(), cudaErrorNotReady);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_LT(rt->mark_seconds(from, to), 0);
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  float* a = device_floats(kN);
  vgpu_rt::fill(m, a, kN, 0.0f);  // its launch check sees no stale error
  gate.open = true;
  synchronize(main_);
  EXPECT_GE(rt->mark_seconds(from, to), 0);
  rt->free_mark(from);
  rt->free_mark(to);
  free_floats(a, kN);
}

// After a device fault every later call fails with it, cudaGetLastError included (it never clears
// a sticky error); the fault report names the kernel and the access.
TEST_F(VgpuRuntime, StickyErrorFailsEveryLaterCall) {
  cuda::CudaContext& s = cuda_of(side_);
  float* a = device_floats(kN);
  synchronize(main_);
  stream_wait(side_, main_);
  launch_maybe_reported([&] { vgpu_rt::past_end(s, a, kN); });  // no sync check
  EXPECT_EQ(cudaStreamSynchronize(s.stream()), cudaErrorIllegalAddress);
  const std::string report = vgpu::fault_report();
  EXPECT_NE(report.find("past_end_kernel"), std::string::npos) << report;
  EXPECT_NE(report.find("bytes past the end"), std::string::npos) << report;
  void* p = nullptr;
  cudaEvent_t ev = nullptr;
  cudaStream_t st = nullptr;
  EXPECT_EQ(cudaMallocAsync(&p, 256, s.stream()), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaMemsetAsync(a, 0, 16, s.stream()), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaFreeAsync(a, s.stream()), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaEventCreate(&ev), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaStreamCreate(&st), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaMallocHost(&p, 64), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaSetDevice(0), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);  // not cleared
  EXPECT_THROW(synchronize(main_), Error);
  EXPECT_THROW(vgpu_rt::fill(s, a, kN, 0.0f), Error);  // the launch check
  vgpu::reset_fault_for_tests();
  free_floats(a, kN);
}

// Pinned host memory: copies to and from it are asynchronous (read when the stream gets there);
// the device's name and memory as the start-up check reads them; the pool's release threshold.
TEST_F(VgpuRuntime, PinnedCopiesDeviceInfoAndPool) {
  cuda::CudaContext& s = cuda_of(side_);
  float* a = device_floats(kN);
  synchronize(main_);
  float* in = static_cast<float*>(mem_alloc_host(Device::kCUDA, kN * sizeof(float), MemCategory::kActivations));
  float* out = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&out), kN * sizeof(float), cudaHostAllocDefault), cudaSuccess);
  for (int i = 0; i < kN; ++i) in[i] = static_cast<float>(i);
  ASSERT_EQ(cudaMemcpyAsync(a, in, kN * sizeof(float), cudaMemcpyHostToDevice, s.stream()), cudaSuccess);
  vgpu_rt::twice(s, a, a, kN);
  ASSERT_EQ(cudaMemcpyAsync(out, a, kN * sizeof(float), cudaMemcpyDeviceToHost, s.stream()), cudaSuccess);
  s.synchronize();
  EXPECT_EQ(out[10], 20.0f);
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, out), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeHost);
  ASSERT_EQ(cudaPointerGetAttributes(&attr, a), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeDevice);
  EXPECT_EQ(cudaFreeHost(out), cudaSuccess);
  mem_free_host(Device::kCUDA, in, kN * sizeof(float), MemCategory::kActivations);
  stream_wait(main_, side_);
  free_floats(a, kN);
  const auto info = device_memory_info(Device::kCUDA, 0);
  ASSERT_TRUE(info.has_value());
  EXPECT_GT(info->total, info->free);
  EXPECT_NE(info->name.find("vgpu"), std::string::npos);
  cudaMemPool_t pool = nullptr;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
  uint64_t threshold = 0;
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold), cudaSuccess);
  EXPECT_EQ(threshold, UINT64_MAX);  // context.cpp keeps freed memory in the pool
}

}  // namespace
}  // namespace ft

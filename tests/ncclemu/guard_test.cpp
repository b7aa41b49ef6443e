// The joint of the emulated GPU and the CUDA/NCCL stand-in (bridge.cpp), without which
// devemu_nccl_layouts could pass vacuously: NcclComm's collectives on emulated device memory give
// the right numbers, the arena stays closed around them (host code that touches device memory
// still dies), the stand-in's workers touch device memory only through the hook, an op issued on
// a communication stream runs after the work queued there before it, a copy waits for it, and a
// released context's stream is no worker any more. One rank (a group of one): no MPI.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <time.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "arena.h"
#include "backends/cuda/nccl_comm.h"
#include "kernels/ops.h"
#include "standin.h"
#include "tensor/device_runtime.h"
#include "tensor/dtype.h"
#include "tensor/memory.h"

namespace ft {
namespace {

class NcclEmuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");  // worker threads exist
    ctx_ = make_exec_context(Device::kCUDA, 0);
  }
  // n floats on the device holding `values`.
  float* upload(const std::vector<float>& values) {
    auto* p = static_cast<float*>(mem_alloc(Device::kCUDA, values.size() * 4, MemCategory::kOther));
    mem_copy(ctx_, p, Device::kCUDA, values.data(), Device::kCPU, values.size() * 4);
    return p;
  }
  std::vector<float> download(const float* p, size_t n) {
    std::vector<float> out(n);
    mem_copy(ctx_, out.data(), Device::kCPU, p, Device::kCUDA, n * 4);
    return out;
  }
  std::shared_ptr<Communicator> nccl() { return make_nccl_comm(make_self_communicator("dp", 0), ctx_, {}); }
  ExecContext ctx_;
};

void default_segv() {
  std::signal(SIGSEGV, SIG_DFL);
}

std::vector<float> ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.1f + 0.37f * static_cast<float>(i);
  return v;
}

// The bf16 wire: to_bf16 and from_bf16 are device ops on the communication context; from the
// second call on (the stream is a worker once NCCL work went on it) they are queued behind the
// collective before them.
TEST_F(NcclEmuTest, Bf16AllReduceOfDeviceMemoryRoundsOnceOnTheCommunicationStream) {
  auto comm = nccl();
  const std::vector<float> x = ramp(1000);
  for (int call = 0; call < 3; ++call) {
    float* d = upload(x);
    comm->all_reduce_async(d, 1000, ReduceOp::kSum, Wire::kBF16)->wait();
    const std::vector<float> got = download(d, 1000);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], bf16_to_f32(f32_to_bf16(x[i]))) << "call " << call;
    mem_free(Device::kCUDA, d, 4000, MemCategory::kOther);
  }
}

// stream_wait on the emulator's compute context: the host waits (its ops run at once).
TEST_F(NcclEmuTest, AllGatherOfDeviceMemoryThenStreamWait) {
  auto comm = nccl();
  const std::vector<float> x = ramp(64);
  float* in = upload(x);
  float* out = upload(std::vector<float>(64, -1.0f));
  comm->all_gather_async(out, in, 64 * 4)->stream_wait(ctx_);
  EXPECT_EQ(download(out, 64), x);
}

TEST_F(NcclEmuTest, ArenaIsClosedAfterACollective) {
  EXPECT_EXIT(
      {
        default_segv();
        auto comm = nccl();
        float* d = upload(ramp(256));
        comm->all_reduce_async(d, 256, ReduceOp::kSum, Wire::kF32)->wait();
        volatile float v = d[0];  // host code reading the result in place
        std::printf("read %f\n", static_cast<double>(v));
        std::exit(0);
      },
      ::testing::KilledBySignal(SIGSEGV), "");
}

// Without the bridge's hook the stand-in's worker would read device memory with the arena closed:
// the guard catches it (so with the hook, it is the hook that opens it, and only there).
TEST_F(NcclEmuTest, TheStandInReachesDeviceMemoryOnlyThroughTheHook) {
  EXPECT_EXIT(
      {
        default_segv();
        ncclsim::set_memory_access(nullptr);
        auto comm = nccl();
        float* d = upload(ramp(256));
        comm->all_reduce_async(d, 256, ReduceOp::kSum, Wire::kF32)->wait();
        std::exit(0);
      },
      ::testing::KilledBySignal(SIGSEGV), "");
}

// A worker stream (what NcclComm's communication streams become): an op issued on its context
// runs after what was queued before it; a copy on it first waits for the queue.
TEST_F(NcclEmuTest, OpsAndCopiesOnAWorkerStreamRunInOrder) {
  const ExecContext side = make_side_context(ctx_);
  ncclsim::adopt_stream(side.stream);
  float* d = upload(std::vector<float>(16, 1.0f));
  auto slow_write = [d] {
    timespec ts{0, 50 * 1000 * 1000};
    nanosleep(&ts, nullptr);
    ncclsim::touch_memory([d] {
      for (int i = 0; i < 16; ++i) d[i] = 3.0f;
    });
  };
  ASSERT_TRUE(ncclsim::queue_on_worker(side.stream, slow_write));
  ops::add_inplace(side, d, d, 16);  // d *= 2, queued behind the write
  std::vector<float> got(16);
  mem_copy(side, got.data(), Device::kCPU, d, Device::kCUDA, 64);  // waits for both
  EXPECT_EQ(got, std::vector<float>(16, 6.0f));
}

// Stream-ordered allocation: memory allocated on the compute stream is usable on a communication
// stream once that stream waited for the compute stream after the allocation (NcclComm's bf16
// scratch, grown after its `ready` event was recorded, died here before the fix).
TEST_F(NcclEmuTest, MemoryAllocatedAfterTheStreamsLastWaitIsRefused) {
  const ExecContext side = make_side_context(ctx_);
  cudaEvent_t ready = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), cudaSuccess);
  auto* stream = static_cast<cudaStream_t>(side.stream);
  ASSERT_EQ(cudaEventRecord(ready, static_cast<cudaStream_t>(ctx_.stream)), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(stream, ready, 0), cudaSuccess);
  ncclsim::adopt_stream(side.stream);
  void* before = mem_alloc(Device::kCUDA, 256, MemCategory::kOther);  // after the wait
  EXPECT_DEATH(ncclsim::check_ordered(side.stream, before, "ncclAllReduce"),
               "ncclAllReduce on a communication stream uses device memory .* allocated .* after the stream last "
               "waited for the compute stream");
  ASSERT_EQ(cudaEventRecord(ready, static_cast<cudaStream_t>(ctx_.stream)), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(stream, ready, 0), cudaSuccess);
  ncclsim::check_ordered(side.stream, before, "ncclAllReduce");  // ordered now: returns
  cudaStreamSynchronize(stream);
  cudaEventDestroy(ready);
  mem_free(Device::kCUDA, before, 256, MemCategory::kOther);
}

TEST_F(NcclEmuTest, AReleasedContextsStreamIsNoWorker) {
  const void* token = nullptr;
  {
    const ExecContext side = make_side_context(ctx_);
    token = side.stream;
    ncclsim::adopt_stream(token);
    EXPECT_TRUE(ncclsim::queue_on_worker(token, [] {}));
  }
  EXPECT_FALSE(ncclsim::queue_on_worker(token, [] {}));
  // The compute context's stream was never given NCCL work: synchronous.
  EXPECT_FALSE(ncclsim::queue_on_worker(ctx_.stream, [] {}));
}

}  // namespace
}  // namespace ft

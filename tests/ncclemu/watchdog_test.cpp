// NcclComm's bounds on the host-emulated GPU's device buffers, with the host stand-in of CUDA and
// NCCL behind it (tests/ncclemu/bridge.cpp; real MPI ranks): an operation nobody waits for on the
// host — only stream-waited on the emulated compute stream, whose wait blocks the calling thread as
// a GPU's compute stream would stall — is ended by the watchdog after the collective timeout, the
// communicator aborted and the failure handed to the process's failure handler; the
// initialisation of a communicator one rank never reaches ends likewise, naming that rank. The last
// rank plays the one that never arrives. Each test leaves its aborted communicator behind (pending
// MPI requests and all), as a failed job would: run this binary alone.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <stdlib.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "backends/cuda/nccl_comm.h"
#include "parallel/comm/mpi_comm.h"
#include "tensor/device_runtime.h"
#include "tensor/memory.h"
#include "util/clock.h"

namespace ft {
namespace {

constexpr double kTimeout = 2;

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// The rank's compute context on the emulated GPU.
const ExecContext& gpu() {
  static const ExecContext ctx = make_exec_context(Device::kCUDA, 0);
  return ctx;
}

// n floats of device memory holding v (never freed: a test may leave an operation on it pending).
float* device_floats(int64_t n, float v) {
  const std::vector<float> host(static_cast<size_t>(n), v);
  auto* p = static_cast<float*>(mem_alloc(Device::kCUDA, static_cast<size_t>(n) * 4, MemCategory::kOther));
  mem_copy(gpu(), p, Device::kCUDA, host.data(), Device::kCPU, static_cast<size_t>(n) * 4);
  return p;
}

// An arrival-board directory every rank shares (rank 0 makes it).
std::string shared_board_dir() {
  char path[64] = "/tmp/ft_watchdog_XXXXXX";
  if (world_rank() == 0 && !mkdtemp(path)) path[0] = 0;
  MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
  return path;
}

// Polling an operation still running (Work::done: cudaEventQuery answers cudaErrorNotReady, which
// the stand-in, as the CUDA runtime may, also leaves as the thread's last error) leaves no error for
// the thread's next launch check to report as its own; the communicator is finalised before it is
// destroyed (the stand-in's ncclCommDestroy dies otherwise). Rank 0 polls before the others join.
TEST(NcclWatchdog, APollOfARunningOperationLeavesNoLastError) {
  const int me = world_rank(), P = world_size();
  const CommOptions opts{kTimeout, shared_board_dir(), false};
  {
    std::shared_ptr<Communicator> c = make_nccl_comm(mpi_world("poll", opts), gpu(), opts);
    float* x = device_floats(1000, 1.0f);
    if (me == 0) {
      WorkPtr w = c->all_reduce_async(x, 1000);
      EXPECT_FALSE(w->done());  // the others have not joined it yet
      EXPECT_EQ(cudaGetLastError(), cudaSuccess);
      MPI_Barrier(MPI_COMM_WORLD);
      w->wait();
    } else {
      MPI_Barrier(MPI_COMM_WORLD);
      c->all_reduce_async(x, 1000)->wait();
    }
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    float x0 = 0;
    mem_copy(gpu(), &x0, Device::kCPU, x, Device::kCUDA, 4);
    EXPECT_EQ(x0, static_cast<float>(P));
    mem_free(Device::kCUDA, x, 4000, MemCategory::kOther);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// What the failure handler was given.
struct Reported {
  std::mutex mu;
  std::vector<std::string> messages;
};
Reported g_reported;

TEST(NcclWatchdog, EndsACollectiveOnlyStreamWaitedThatOneRankNeverJoins) {
  const int me = world_rank(), P = world_size(), missing = P - 1;
  const CommOptions opts{kTimeout, shared_board_dir(), false};
  set_comm_failure_handler([](const CommError& e) {
    std::lock_guard<std::mutex> lock(g_reported.mu);
    g_reported.messages.push_back(e.what());
  });
  std::shared_ptr<Communicator> c = make_nccl_comm(mpi_world("wd", opts), gpu(), opts);
  float* x = device_floats(1000, 1.0f);
  if (me != missing) {
    WorkPtr w = c->all_reduce_async(x, 1000);
    const double t0 = now_seconds();
    // The emulated compute stream's wait blocks the host until the watchdog's abort ends the
    // operation (on a GPU, the compute stream would stall there instead).
    w->stream_wait(gpu());
    const double waited = now_seconds() - t0;
    EXPECT_THROW(w->wait(), CommError);
    EXPECT_GE(waited, kTimeout);
    EXPECT_LT(waited, kTimeout + 5) << "the watchdog, not a host wait's own bound, ended it";
    std::vector<std::string> got;
    {
      std::lock_guard<std::mutex> lock(g_reported.mu);
      got = g_reported.messages;
    }
    ASSERT_EQ(got.size(), 1u);
    EXPECT_NE(got[0].find(fmt::format("rank {}: all_reduce #1 on group wd (world ranks 0..{}) over NCCL timed out "
                                      "after 2 s; ranks holding it up: {} (never arrived)",
                                      me, P - 1, missing)),
              std::string::npos)
        << got[0];
    try {  // every later call fails with the same error
      c->all_reduce_async(x, 1000);
      ADD_FAILURE() << "a call on an aborted communicator succeeded";
    } catch (const CommError& e) {
      EXPECT_EQ(std::string(e.what()), got[0]);
    }
  }
  set_comm_failure_handler(nullptr);
  MPI_Barrier(MPI_COMM_WORLD);
  if (me == missing) new std::shared_ptr<Communicator>(c);  // never destroyed: its peers hold a pending operation
}

// The last rank takes part in the unique id's broadcast (NcclComm's first step, over the host group)
// and then never starts its NCCL initialisation.
TEST(NcclWatchdog, InitialisationThatOneRankNeverReachesEndsNamingIt) {
  const int me = world_rank(), P = world_size(), missing = P - 1;
  const CommOptions opts{kTimeout, shared_board_dir(), false};
  std::shared_ptr<Communicator> host = mpi_world("init", opts);
  if (me == missing) {
    char id[128];  // sizeof(ncclUniqueId)
    host->broadcast(id, sizeof id, 0);
  } else {
    const double t0 = now_seconds();
    try {
      make_nccl_comm(host, gpu(), opts);
      ADD_FAILURE() << "the initialisation finished without rank " << missing;
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find(fmt::format("rank {}: ncclCommInitRankConfig on group init (world ranks "
                                                       "0..{}) over NCCL timed out after 2 s; ranks holding it up: "
                                                       "{} (never arrived)",
                                                       me, P - 1, missing)),
                std::string::npos)
          << e.what();
    }
    EXPECT_LT(now_seconds() - t0, kTimeout + 5);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace ft

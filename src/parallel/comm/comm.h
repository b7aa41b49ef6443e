// Communicator: the only way fluxtrain's parallelisms talk to the network. A communicator is a
// group of ranks (one mesh axis: "dp", "tp", "pp", or "world"). MPI implements it for CPU ranks
// (parallel/comm/mpi_comm.h); NCCL for device buffers (backends/cuda/nccl_comm.h), bootstrapped
// through MPI, with host buffers still on MPI (parallel/comm/device_comm.h chooses).
//
// Every collective has a non-blocking form returning a Work handle; the blocking form is the
// non-blocking one followed by wait(). Collectives of one communicator run in submission order
// on its communication thread, so compute overlaps them (bucketed gradient all-reduce, ZeRO-3
// prefetch). Every wait is bounded by the collective timeout: a peer that died or hangs turns
// into a CommError naming the collective, the group and the ranks holding it up (never
// arrived, or stopped inside it).
//
//   Communicator& dp = mesh.dp();
//   WorkPtr w = dp.all_reduce_async(grads, n, ReduceOp::kSum, Wire::kBF16);   // starts now
//   ...backward of earlier layers...
//   w->wait();                                                             // grads summed
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "parallel/comm/wire.h"
#include "tensor/exec_context.h"
#include "util/error.h"

namespace ft {

enum class ReduceOp : uint8_t { kSum = 0, kMax = 1 };

enum class CollKind : uint8_t { kAllReduce = 0, kReduceScatter, kAllGather, kBroadcast, kSendRecv, kBarrier, kCount };
constexpr size_t kNumCollKinds = static_cast<size_t>(CollKind::kCount);
const char* coll_kind_name(CollKind k);  // "all_reduce", ...

// Bytes this rank sent and seconds it spent, per kind of collective.
struct CommStats {
  std::array<int64_t, kNumCollKinds> bytes_sent{};
  std::array<int64_t, kNumCollKinds> calls{};
  std::array<double, kNumCollKinds> seconds{};
  CommStats& operator+=(const CommStats& o);
  CommStats operator-(const CommStats& o) const;
  int64_t total_bytes() const;
};

// A failure of communication: timeout (a peer hung or died) or a transport error.
class CommError : public Error {
 public:
  using Error::Error;
};

// A pending operation.
class Work {
 public:
  virtual ~Work() = default;
  // Blocks until done; throws CommError on failure or timeout.
  virtual void wait() = 0;
  virtual bool done() = 0;
  // Work queued on ctx's stream after this call runs after the operation, without blocking the
  // host where the transport can order streams (NCCL on a GPU); elsewhere (MPI, a host context)
  // the same as wait().
  virtual void stream_wait(const ExecContext& ctx) {
    (void)ctx;
    wait();
  }
};
using WorkPtr = std::shared_ptr<Work>;

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const std::string& name() const = 0;
  // Global (world) rank of group member i.
  virtual int world_rank_of(int i) const = 0;

  // data (n) reduced in place over the group.
  virtual WorkPtr all_reduce_async(float* data, int64_t n, ReduceOp op = ReduceOp::kSum, Wire wire = Wire::kF32) = 0;
  virtual WorkPtr all_reduce_async(double* data, int64_t n, ReduceOp op = ReduceOp::kSum) = 0;
  // in (n · size): rank r receives in out (n) the sum of every rank's block r.
  virtual WorkPtr reduce_scatter_async(float* out, const float* in, int64_t n, Wire wire = Wire::kF32) = 0;
  // in (bytes): out (bytes · size) receives rank i's block at offset i · bytes.
  virtual WorkPtr all_gather_async(void* out, const void* in, int64_t bytes) = 0;
  virtual WorkPtr broadcast_async(void* data, int64_t bytes, int root) = 0;
  // Point to point (pipeline activations). Matched by (peer, tag) in order.
  virtual WorkPtr send_async(const void* data, int64_t bytes, int peer, int tag) = 0;
  virtual WorkPtr recv_async(void* data, int64_t bytes, int peer, int tag) = 0;
  virtual void barrier() = 0;

  void all_reduce(float* data, int64_t n, ReduceOp op = ReduceOp::kSum, Wire wire = Wire::kF32) {
    all_reduce_async(data, n, op, wire)->wait();
  }
  void all_reduce(double* data, int64_t n, ReduceOp op = ReduceOp::kSum) { all_reduce_async(data, n, op)->wait(); }
  void reduce_scatter(float* out, const float* in, int64_t n, Wire wire = Wire::kF32) {
    reduce_scatter_async(out, in, n, wire)->wait();
  }
  void all_gather(void* out, const void* in, int64_t bytes) { all_gather_async(out, in, bytes)->wait(); }
  void broadcast(void* data, int64_t bytes, int root) { broadcast_async(data, bytes, root)->wait(); }
  void send(const void* data, int64_t bytes, int peer, int tag) { send_async(data, bytes, peer, tag)->wait(); }
  void recv(void* data, int64_t bytes, int peer, int tag) { recv_async(data, bytes, peer, tag)->wait(); }

  // Cumulative statistics of this communicator (a wrapper reports its transport's).
  virtual CommStats stats() const;

 protected:
  void record(CollKind k, int64_t bytes, double seconds);

 private:
  mutable std::mutex stats_mu_;
  CommStats stats_;
};

// The calling thread's host waits on communication — Work::wait() of any transport, and a
// stream_wait that blocks the host (the host-emulated GPU's, tests/ncclemu) — in seconds and in number (each
// wait counts once, also one whose operation had already finished). The step loop takes both
// differences over a step: wall time minus data wait minus the seconds is the rank's compute time,
// which straggler detection compares across ranks; the number is metrics.jsonl's comm_host_waits,
// on a GPU rank the points where the host cannot run ahead of the device. A transport calls
// add_comm_blocked_seconds once per such wait.
double comm_blocked_seconds();
int64_t comm_host_waits();
void add_comm_blocked_seconds(double seconds);

// A communication failure found off the caller's thread: a device transport's watchdog saw an
// operation that nobody waits for on the host (only stream-waited, or not at all) time out or fail,
// and aborted its communicator. The handler — the train command's — ends the job as a CommError
// thrown on the training thread would (even while that thread is blocked in a device synchronize);
// with none set, the failure surfaces at the communicator's next call. Null clears it.
using CommFailureHandler = std::function<void(const CommError&)>;
void set_comm_failure_handler(CommFailureHandler handler);
void report_comm_failure(const CommError& e);

// The size-1 group: every collective is a copy or nothing.
std::unique_ptr<Communicator> make_self_communicator(const std::string& name, int world_rank);

}  // namespace ft

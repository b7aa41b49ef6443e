#include "backends/cuda/nccl_comm.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/cuda/nccl_api.h"
#include "kernels/ops.h"
#include "parallel/comm/arrival_board.h"
#include "tensor/device_runtime.h"
#include "tensor/memory.h"
#include "util/clock.h"

namespace ft {
namespace {

constexpr const char* kHint =
    "a rank died or hangs, or NCCL failed; see every rank's log. The bound is "
    "parallel.collective_timeout_s";

void cuda_ok(cudaError_t e, const char* call) {
  if (e != cudaSuccess) {
    cudaGetLastError();  // reported here: not the next launch's error
    throw CommError(fmt::format("{} failed: {}", call, cudaGetErrorString(e)), kHint);
  }
}

// cudaEventQuery. The runtime also leaves cudaErrorNotReady as the thread's last error, which the
// next launch check (backends/cuda/cuda_check.h) would report as that kernel's failure: cleared here.
cudaError_t event_query(cudaEvent_t e) {
  const cudaError_t r = cudaEventQuery(e);
  if (r == cudaErrorNotReady) cudaGetLastError();
  return r;
}

// The NCCL functions (nccl_api.h), loaded when the first NcclComm is made: every call below runs on
// a communicator, so after that.
std::atomic<const NcclApi*> g_nccl{nullptr};
const NcclApi& nccl() {
  return *g_nccl.load(std::memory_order_acquire);
}

// Bytes this rank sends in the ring algorithms, counted exactly as MpiComm's ring sends them (its
// chunk boundaries), so that the accounting of a layout is the same over either transport. NCCL's
// ring sends the same amounts; its tree and NVLS algorithms differ.
int64_t ring_all_reduce_bytes(int64_t n, int64_t elem, int P, int rank) {
  if (P == 1 || n == 0) return 0;
  auto begin = [&](int c) { return n * c / P; };
  auto len = [&](int c) { return begin(c + 1) - begin(c); };
  int64_t b = 0;
  for (int s = 0; s < P - 1; ++s) b += len(((rank - s - 1) % P + P) % P) + len(((rank - s) % P + P) % P);
  return b * elem;
}

// Bytes rank sends in a binomial-tree broadcast from root (MpiComm's tree).
int64_t tree_broadcast_bytes(int64_t bytes, int P, int rank, int root) {
  const int me = (rank - root + P) % P;
  int mask = 1;
  while (mask < P && !(me & mask)) mask <<= 1;
  int64_t sent = 0;
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (me + mask < P) sent += bytes;
  return sent;
}

// A point-to-point channel of the pp group: a 2-rank NCCL communicator and its own stream for one
// direction of one link and one kind of transfer (the sender is its rank 0).
struct Channel {
  int from = 0, to = 0, kind = 0;  // group ranks; kind = tag & 1
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  ExecContext ctx;  // owns the stream on a GPU
};

// One operation on a communication stream, from its launch until it is seen finished: the timing
// events around it on its stream (start: after the stream's wait for the compute stream; done: the
// Work's event) and what names it in an error.
struct Op {
  cudaEvent_t start = nullptr, done = nullptr;
  CollKind kind = CollKind::kAllReduce;
  int64_t seq = 0;         // > 0: collective #seq of the group; else a transfer:
  int peer = -1, tag = 0;  // with group rank `peer`; tag < 0: a receive of tag -tag - 1
  Channel* ch = nullptr;   // the transfer's channel, or null (lives as long as the Core)
  bool timed = true;       // its time counts in CommStats (a receive counts neither bytes nor time)
  bool finished = false;
  double started_at = 0;  // host clock when the watchdog first saw the stream start it (0: not yet)
  Op() = default;
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;
  ~Op() {
    if (start) cudaEventDestroy(start);
    if (done) cudaEventDestroy(done);
  }
};

// One axis' NCCL state, shared with the Works it hands out.
struct Core {
  std::shared_ptr<Communicator> host;
  ExecContext compute;   // the rank's compute context
  ExecContext comm_ctx;  // ops on the communication stream (a side context of compute)
  cudaStream_t stream = nullptr;
  cudaEvent_t ready = nullptr;  // recorded on the compute stream before each collective
  ncclComm_t comm = nullptr;
  std::string name;
  CommOptions opts;
  int rank = 0, size = 1;
  std::vector<int> world;
  std::unique_ptr<ArrivalBoard> board;
  std::vector<Channel> channels;  // opts.p2p_channels: to and from the neighbouring ranks

  std::mutex mu;
  int64_t seq = 0, finished = 0;  // collectives enqueued / seen finished
  std::string failed;             // the first failure: every later call fails with it
  uint16_t* scratch = nullptr;    // bf16/fp16 wire buffer on the device, used on the stream in order
  int64_t scratch_n = 0;
  std::vector<std::shared_ptr<Op>> outstanding;  // launched, not yet seen finished
  std::array<double, kNumCollKinds> seconds{};   // stream time of the finished operations, per kind
  std::condition_variable wake;                  // the watchdog: an operation launched, or stop
  bool stop = false;

  // cudaSuccess once op has finished (cudaErrorNotReady while it runs, or its event's error). The
  // first time it is seen finished, its stream time (start to done event) is counted and its
  // collective marked left on the arrival board. Under mu.
  cudaError_t query(Op& op) {
    if (op.finished) return cudaSuccess;
    const cudaError_t e = event_query(op.done);
    if (e != cudaSuccess) return e;
    op.finished = true;
    float ms = 0;
    if (op.timed) {
      if (cudaEventElapsedTime(&ms, op.start, op.done) == cudaSuccess)
        seconds[static_cast<size_t>(op.kind)] += ms / 1e3;
      else
        cudaGetLastError();  // not this thread's next launch's error
    }
    if (op.seq > finished) {
      finished = op.seq;
      board->finish(op.seq);
    }
    return cudaSuccess;
  }
  // Counts the finished operations (whether or not anyone waited for them) and forgets them.
  void harvest() {
    std::erase_if(outstanding, [&](const std::shared_ptr<Op>& op) { return query(*op) == cudaSuccess; });
  }
  // "rank 0: all_reduce #3 on group dp over NCCL", "rank 0: send to world rank 1 (tag 2) on group pp over NCCL"
  std::string describe(const Op& op) const {
    const int me = world[static_cast<size_t>(rank)];
    if (op.seq > 0)
      return fmt::format("rank {}: {} #{} on group {} over NCCL", me, coll_kind_name(op.kind), op.seq, name);
    return fmt::format("rank {}: {} world rank {} (tag {}) on group {} over NCCL", me,
                       op.tag < 0 ? "receive from" : "send to", world[static_cast<size_t>(op.peer)],
                       op.tag < 0 ? -op.tag - 1 : op.tag, name);
  }
  // The asynchronous error NCCL reports on op's communicator, as op's failure; "" when none.
  std::string async_error(const Op& op) {
    ncclComm_t on = op.ch ? op.ch->comm : comm;
    ncclResult_t async = ncclSuccess;
    if (on) nccl().CommGetAsyncError(on, &async);
    if (async == ncclSuccess || async == ncclInProgress) return "";
    const std::string last = nccl().GetLastError(on);
    return fmt::format("{}: NCCL reported an asynchronous error: {}{}{}", describe(op), nccl().GetErrorString(async),
                       last.empty() ? "" : ": ", last);
  }
  // The message of op's timeout, in MPI's format plus " over NCCL" (ranks holding it up: the board).
  std::string timeout_message(const Op& op) {
    if (op.seq > 0)
      return collective_timeout_error(world[static_cast<size_t>(rank)], op.kind, op.seq, name, world, " over NCCL",
                                      opts.timeout_s, board->holding_up(op.seq, -1, world))
          .what();
    return fmt::format("{} timed out after {:.0f} s", describe(op), opts.timeout_s);
  }
  // The watchdog's look at every outstanding operation (under mu): counts the finished ones and
  // returns the first failure — an event's error, an asynchronous NCCL error, or an operation its
  // stream started more than parallel.collective_timeout_s ago (an operation behind it on the
  // stream, not started yet, waits for that one's bound) — or "".
  std::string check(double now) {
    for (const std::shared_ptr<Op>& op : outstanding) {
      const cudaError_t e = query(*op);
      if (e == cudaSuccess) continue;
      if (e != cudaErrorNotReady) return fmt::format("{}: {}", describe(*op), cudaGetErrorString(e));
      if (std::string why = async_error(*op); !why.empty()) return why;
      if (op->started_at == 0 && event_query(op->start) == cudaSuccess) op->started_at = now;
      if (op->started_at > 0 && now - op->started_at > opts.timeout_s) return timeout_message(*op);
    }
    harvest();
    return "";
  }

  // Ends a communicator no longer used (a destructor's: never throws). Nonblocking communicators
  // are finalised first — ncclCommFinalize flushes what was issued on it and may answer
  // ncclInProgress — polled until done, bounded by the collective timeout; then destroyed. One that
  // fails or does not finish in time is aborted instead. Under mu.
  void close(ncclComm_t& on, cudaStream_t stream) noexcept {
    if (!on) return;
    if (cudaStreamSynchronize(stream) != cudaSuccess) cudaGetLastError();
    ncclResult_t r = nccl().CommFinalize(on);
    const double deadline = now_seconds() + opts.timeout_s;
    while (r == ncclInProgress && now_seconds() < deadline) {
      timespec ts{0, 1000000};
      nanosleep(&ts, nullptr);
      if (nccl().CommGetAsyncError(on, &r) != ncclSuccess) r = ncclInternalError;
    }
    if (r == ncclSuccess)
      nccl().CommDestroy(on);
    else
      nccl().CommAbort(on);
    on = nullptr;
  }
  // Aborts the communicators (their kernels and pending operations end, so a stream or host
  // waiting on one wakes) and remembers why: every later call fails with it. Under mu.
  void abort_with(const std::string& msg) {
    if (comm) nccl().CommAbort(comm);
    comm = nullptr;
    for (Channel& ch : channels) {
      if (ch.comm) nccl().CommAbort(ch.comm);
      ch.comm = nullptr;
    }
    if (failed.empty()) failed = msg;
  }
  [[noreturn]] void fail(const std::string& msg) {
    abort_with(msg);
    throw CommError(failed, kHint);
  }
  void check_failed() const {
    if (!failed.empty()) throw CommError(failed, kHint);
  }
  // Fails unless NCCL accepted the call. The communicators are nonblocking (ncclConfig_t::blocking
  // = 0, so that no NCCL call can hang the host): a call may return ncclInProgress before NCCL has
  // enqueued its work, so this waits until the communicator's state says it has, bounded by the
  // collective timeout, before anything else goes on the stream.
  void nccl_ok(ncclResult_t r, const char* call, ncclComm_t on = nullptr) {
    if (!on) on = comm;
    const double deadline = now_seconds() + opts.timeout_s;
    while (r == ncclInProgress && on) {
      if (now_seconds() > deadline)
        fail(fmt::format("rank {}: {} on group {} over NCCL was not enqueued within {:.0f} s",
                         world[static_cast<size_t>(rank)], call, name, opts.timeout_s));
      timespec ts{0, 20000};
      nanosleep(&ts, nullptr);
      nccl().CommGetAsyncError(on, &r);
    }
    if (r == ncclSuccess || r == ncclInProgress) return;
    std::string last = on ? nccl().GetLastError(on) : "";
    fail(fmt::format("rank {}: {} on group {} failed: {}{}{}", world[static_cast<size_t>(rank)], call, name,
                     nccl().GetErrorString(r), last.empty() ? "" : ": ", last));
  }
  // A new NCCL communicator over n ranks, this one rank r in it, initialised without blocking the
  // host (NCCL does it in the background) and polled until ready, bounded by the collective
  // timeout: a rank that never arrives (dead, hung, or stopped before its initialisation) becomes a
  // CommError naming `what` and who held it up — from `board` (a rank arrives once it has started
  // its initialisation), or `peer` (a world rank) without one — after the communicator is aborted.
  ncclComm_t init_comm(int n, const ncclUniqueId& id, int r, const std::string& what, ArrivalBoard* board, int peer) {
    const int me = world[static_cast<size_t>(rank)];
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t made = nullptr;
    ncclResult_t res = nccl().CommInitRankConfig(&made, n, id, r, &config);
    if (board) board->arrive(1);
    const double deadline = now_seconds() + opts.timeout_s;
    while (res == ncclInProgress && made) {
      if (now_seconds() > deadline) {
        nccl().CommAbort(made);
        throw CommError(
            fmt::format("rank {}: ncclCommInitRankConfig {} over NCCL timed out after {:.0f} s; ranks "
                        "holding it up: {}",
                        me, what, opts.timeout_s, board ? board->holding_up(1, -1, world) : fmt::format("{}", peer)),
            kHint);
      }
      timespec ts{0, 1000000};
      nanosleep(&ts, nullptr);
      nccl().CommGetAsyncError(made, &res);
    }
    if (res != ncclSuccess) {
      const std::string last = made ? nccl().GetLastError(made) : "";
      if (made) nccl().CommAbort(made);
      throw CommError(fmt::format("rank {}: ncclCommInitRankConfig {} over NCCL failed: {}{}{}", me, what,
                                  nccl().GetErrorString(res), last.empty() ? "" : ": ", last),
                      kHint);
    }
    if (board) board->finish(1);
    return made;
  }
  cudaStream_t new_stream(ExecContext* owner) {
    *owner = make_side_context(compute);
    return static_cast<cudaStream_t>(owner->stream);
  }
  // The channel of a transfer, or null (it goes on the group's own communicator and stream).
  Channel* channel(int from, int to, int tag) {
    for (Channel& ch : channels)
      if (ch.from == from && ch.to == to && ch.kind == (tag & 1)) return &ch;
    return nullptr;
  }
  uint16_t* bf16_scratch(int64_t n) {
    if (n > scratch_n) {
      // Operations queued before still use the old buffer: let them finish first (rare: it grows
      // to the largest bucket within the first step).
      cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      if (scratch) mem_free(compute.device, scratch, static_cast<size_t>(scratch_n) * 2, MemCategory::kCommunication);
      scratch =
          static_cast<uint16_t*>(mem_alloc(compute.device, static_cast<size_t>(n) * 2, MemCategory::kCommunication));
      scratch_n = n;
      // The device's allocator is stream-ordered on the compute stream (cudaMallocAsync): the block
      // may be memory that stream freed and uses until it reaches the free. The `ready` event was
      // recorded before this allocation, so order the communication stream after it again.
      cuda_ok(cudaEventRecord(ready, static_cast<cudaStream_t>(compute.stream)), "cudaEventRecord");
      cuda_ok(cudaStreamWaitEvent(stream, ready, 0), "cudaStreamWaitEvent");
    }
    return scratch;
  }
};

// A pending operation. The watchdog (NcclComm) bounds it whoever waits; wait() polls it on the host.
class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<Core> c, std::shared_ptr<Op> op) : c_(std::move(c)), op_(std::move(op)) {}

  void wait() override {
    if (op_->finished) return add_comm_blocked_seconds(0);
    const double t0 = now_seconds();
    // The watchdog fails the operation parallel.collective_timeout_s after its stream started it;
    // this bound only covers one the stream never starts.
    const double deadline = t0 + 2 * c_->opts.timeout_s + 10;
    int spins = 0;
    while (!poll()) {
      if (now_seconds() > deadline) {
        add_comm_blocked_seconds(now_seconds() - t0);
        std::lock_guard<std::mutex> lock(c_->mu);
        c_->check_failed();
        c_->fail(c_->timeout_message(*op_));
      }
      if (++spins > 64) {
        timespec ts{0, 20000};
        nanosleep(&ts, nullptr);
      }
    }
    add_comm_blocked_seconds(now_seconds() - t0);
  }
  bool done() override { return op_->finished || poll(); }
  void stream_wait(const ExecContext& ctx) override {
    {
      std::lock_guard<std::mutex> lock(c_->mu);
      c_->check_failed();
    }
    // Not under the lock: where a stream wait blocks the host (the emulated GPU's synchronous
    // streams in tests/ncclemu), the watchdog must still be able to take it and abort.
    cuda_ok(cudaStreamWaitEvent(static_cast<cudaStream_t>(ctx.stream), op_->done, 0), "cudaStreamWaitEvent");
  }

 private:
  bool poll() {
    std::lock_guard<std::mutex> lock(c_->mu);
    c_->check_failed();
    const cudaError_t e = c_->query(*op_);
    if (e == cudaSuccess) return true;
    if (e != cudaErrorNotReady) c_->fail(fmt::format("{}: {}", c_->describe(*op_), cudaGetErrorString(e)));
    if (std::string why = c_->async_error(*op_); !why.empty()) c_->fail(why);
    return false;
  }

  std::shared_ptr<Core> c_;
  std::shared_ptr<Op> op_;
};

// The watchdog of one NcclComm: every few milliseconds while operations are outstanding, it counts
// the finished ones and checks the others (Core::check); on a failure it aborts the communicators
// (the stream or host waiting on one wakes) and reports it (report_comm_failure: the train command
// ends the job with the failure's line and the exit code the supervisor restarts on).
void watch(const std::shared_ptr<Core>& c) {
  std::unique_lock<std::mutex> lock(c->mu);
  while (!c->stop) {
    if (c->outstanding.empty() || !c->failed.empty()) {
      c->wake.wait(lock);
      continue;
    }
    c->wake.wait_for(lock, std::chrono::milliseconds(5));
    if (c->stop || !c->failed.empty()) continue;
    const std::string why = c->check(now_seconds());
    if (why.empty()) continue;
    c->abort_with(why);
    lock.unlock();
    report_comm_failure(CommError(why, kHint));
    lock.lock();
  }
}

class NcclComm final : public Communicator {
 public:
  NcclComm(std::shared_ptr<Communicator> host, const ExecContext& compute, const CommOptions& opts)
      : c_(std::make_shared<Core>()) {
    g_nccl.store(&nccl_api(), std::memory_order_release);  // CommError when NCCL cannot be loaded
    Core& c = *c_;
    c.host = std::move(host);
    c.compute = compute;
    c.opts = opts;
    c.name = c.host->name();
    if (compute.on_host())
      throw Error(fmt::format("NcclComm of group {} made for a CPU context: NCCL moves device buffers", c.name),
                  "give it the rank's device compute context (parallel/comm/device_comm.h decides where it is used)");
    c.rank = c.host->rank();
    c.size = c.host->size();
    for (int i = 0; i < c.size; ++i) c.world.push_back(c.host->world_rank_of(i));
    c.board =
        std::make_unique<ArrivalBoard>(opts.board_dir, fmt::format("nccl-{}-{}", c.name, c.world[0]), c.size, c.rank);
    cuda_ok(cudaSetDevice(compute.device_index), "cudaSetDevice");
    c.comm_ctx = make_side_context(compute);
    c.stream = static_cast<cudaStream_t>(c.comm_ctx.stream);
    cuda_ok(cudaEventCreateWithFlags(&c.ready, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    // The unique id travels over the axis' host communicator.
    ncclUniqueId id{};
    if (c.rank == 0) c.nccl_ok(nccl().GetUniqueId(&id), "ncclGetUniqueId");
    c.host->broadcast(&id, sizeof id, 0);
    ArrivalBoard init_board(opts.board_dir, fmt::format("nccl-init-{}-{}", c.name, c.world[0]), c.size, c.rank);
    c.comm = c.init_comm(c.size, id, c.rank,
                         fmt::format("on group {} (world ranks {}..{})", c.name, c.world.front(), c.world.back()),
                         &init_board, -1);
    if (opts.p2p_channels && c.size > 1) open_channels();
    host_base_ = c.host->stats();
    watchdog_ = std::thread([c = c_] { watch(c); });
  }

  // Channels for every direction of every link between neighbouring group ranks (r, r ± 1 mod P),
  // one per kind. Each sender makes the ids of its channels; one all-gather over the host group
  // delivers them; every rank then initialises its channels in one global order, each ready before
  // the next (so that the 2-rank initialisations never wait on each other in a cycle).
  void open_channels() {
    Core& c = *c_;
    const int P = c.size;
    std::vector<Channel> all;
    for (int a = 0; a < P; ++a)
      for (int b : {(a + 1) % P, (a - 1 + P) % P})
        for (int kind = 0; kind < 2; ++kind) {
          bool seen = b == a;
          for (const Channel& x : all) seen = seen || (x.from == a && x.to == b && x.kind == kind);
          if (seen) continue;
          Channel ch;
          ch.from = a;
          ch.to = b;
          ch.kind = kind;
          all.push_back(ch);
        }
    std::stable_sort(all.begin(), all.end(), [](const Channel& x, const Channel& y) {
      auto key = [](const Channel& ch) {
        return std::array<int, 4>{std::min(ch.from, ch.to), std::max(ch.from, ch.to), ch.from, ch.kind};
      };
      return key(x) < key(y);
    });
    constexpr int kMaxSent = 4;  // two neighbours, two kinds
    std::vector<ncclUniqueId> mine(kMaxSent), ids(static_cast<size_t>(kMaxSent * P));
    auto index_among_senders = [&](const Channel& ch) {
      int j = 0;
      for (const Channel& x : all) {
        if (&x == &ch) return j;
        if (x.from == ch.from) ++j;
      }
      return j;
    };
    for (const Channel& ch : all)
      if (ch.from == c.rank)
        c.nccl_ok(nccl().GetUniqueId(&mine[static_cast<size_t>(index_among_senders(ch))]), "ncclGetUniqueId");
    c.host->all_gather(ids.data(), mine.data(), kMaxSent * static_cast<int64_t>(sizeof(ncclUniqueId)));
    for (Channel& ch : all) {
      if (ch.from != c.rank && ch.to != c.rank) continue;
      const ncclUniqueId& id = ids[static_cast<size_t>(ch.from * kMaxSent + index_among_senders(ch))];
      const bool sender = ch.from == c.rank;
      const int peer = c.world[static_cast<size_t>(sender ? ch.to : ch.from)];
      ch.comm = c.init_comm(2, id, sender ? 0 : 1,
                            fmt::format("of group {}'s channel {} world rank {}", c.name, sender ? "to" : "from", peer),
                            nullptr, peer);
      ch.stream = c.new_stream(&ch.ctx);
      c.channels.push_back(ch);
    }
  }

  ~NcclComm() override {
    Core& c = *c_;
    {
      std::lock_guard<std::mutex> lock(c.mu);
      c.stop = true;
    }
    c.wake.notify_all();
    watchdog_.join();
    std::lock_guard<std::mutex> lock(c.mu);
    c.close(c.comm, c.stream);
    for (Channel& ch : c.channels) c.close(ch.comm, ch.stream);
    c.harvest();  // Works still held name their operations; the rest go now
    c.outstanding.clear();
    c.channels.clear();
    if (c.failed.empty()) c.failed = fmt::format("the NCCL communicator of group {} was closed", c.name);
    if (c.scratch)
      mem_free(c.compute.device, c.scratch, static_cast<size_t>(c.scratch_n) * 2, MemCategory::kCommunication);
    c.scratch = nullptr;
    cudaEventDestroy(c.ready);
  }

  int rank() const override { return c_->rank; }
  int size() const override { return c_->size; }
  const std::string& name() const override { return c_->name; }
  int world_rank_of(int i) const override { return c_->world[static_cast<size_t>(i)]; }

  // What this group moved: its NCCL operations and the host buffers it passed to MPI.
  // Seconds: the stream time of the operations seen finished so far (finished ones are looked for
  // here too, so that those only ever stream-waited or never waited for count).
  CommStats stats() const override {
    CommStats s = Communicator::stats();
    {
      std::lock_guard<std::mutex> lock(c_->mu);
      c_->harvest();
      for (size_t k = 0; k < kNumCollKinds; ++k) s.seconds[k] += c_->seconds[k];
    }
    s += c_->host->stats() - host_base_;
    return s;
  }

  WorkPtr all_reduce_async(float* data, int64_t n, ReduceOp op, Wire wire) override {
    if (!on_device(data, n)) return c_->host->all_reduce_async(data, n, op, wire);
    if (op == ReduceOp::kMax) wire = Wire::kF32;
    const int64_t elem = wire_bytes(wire);
    return launch(CollKind::kAllReduce, ring_all_reduce_bytes(n, elem, c_->size, c_->rank), -1, 0, [&](Core& c) {
      if (wire == Wire::kF32) {
        c.nccl_ok(nccl().AllReduce(data, data, static_cast<size_t>(n), ncclFloat32, nccl_op(op), c.comm, c.stream),
                  "ncclAllReduce");
        return;
      }
      uint16_t* w = c.bf16_scratch(n);
      to_wire(c.comm_ctx, wire, w, data, n);
      c.nccl_ok(nccl().AllReduce(w, w, static_cast<size_t>(n), nccl_wire_type(wire), ncclSum, c.comm, c.stream),
                "ncclAllReduce");
      from_wire(c.comm_ctx, wire, data, w, n);
    });
  }

  WorkPtr all_reduce_async(double* data, int64_t n, ReduceOp op) override {
    if (!on_device(data, n)) return c_->host->all_reduce_async(data, n, op);
    return launch(CollKind::kAllReduce, 2 * (c_->size - 1) * n * 8 / c_->size, -1, 0, [&](Core& c) {
      c.nccl_ok(nccl().AllReduce(data, data, static_cast<size_t>(n), ncclFloat64, nccl_op(op), c.comm, c.stream),
                "ncclAllReduce");
    });
  }

  WorkPtr reduce_scatter_async(float* out, const float* in, int64_t n, Wire wire) override {
    if (!on_device(in, n)) return c_->host->reduce_scatter_async(out, in, n, wire);
    const int64_t elem = wire_bytes(wire);
    return launch(CollKind::kReduceScatter, (c_->size - 1) * n * elem, -1, 0, [&](Core& c) {
      if (wire == Wire::kF32) {
        c.nccl_ok(nccl().ReduceScatter(in, out, static_cast<size_t>(n), ncclFloat32, ncclSum, c.comm, c.stream),
                  "ncclReduceScatter");
        return;
      }
      const int64_t total = n * c.size;
      uint16_t* w = c.bf16_scratch(total + n);
      to_wire(c.comm_ctx, wire, w, in, total);
      c.nccl_ok(
          nccl().ReduceScatter(w, w + total, static_cast<size_t>(n), nccl_wire_type(wire), ncclSum, c.comm, c.stream),
          "ncclReduceScatter");
      from_wire(c.comm_ctx, wire, out, w + total, n);
    });
  }

  WorkPtr all_gather_async(void* out, const void* in, int64_t bytes) override {
    if (!on_device(out, bytes)) return c_->host->all_gather_async(out, in, bytes);
    return launch(CollKind::kAllGather, (c_->size - 1) * bytes, -1, 0, [&](Core& c) {
      c.nccl_ok(nccl().AllGather(in, out, static_cast<size_t>(bytes), ncclUint8, c.comm, c.stream), "ncclAllGather");
    });
  }

  WorkPtr broadcast_async(void* data, int64_t bytes, int root) override {
    if (!on_device(data, bytes)) return c_->host->broadcast_async(data, bytes, root);
    return launch(CollKind::kBroadcast, tree_broadcast_bytes(bytes, c_->size, c_->rank, root), -1, 0, [&](Core& c) {
      c.nccl_ok(nccl().Broadcast(data, data, static_cast<size_t>(bytes), ncclUint8, root, c.comm, c.stream),
                "ncclBroadcast");
    });
  }

  // One transfer per NCCL group; NCCL matches them in posting order (the tag is not sent): on the
  // link's channel for the tag's kind when the group has channels, else on the group's stream.
  WorkPtr send_async(const void* data, int64_t bytes, int peer, int tag) override {
    if (!on_device(data, bytes)) return c_->host->send_async(data, bytes, peer, tag);
    return transfer(/*send=*/true, const_cast<void*>(data), bytes, peer, tag);
  }
  WorkPtr recv_async(void* data, int64_t bytes, int peer, int tag) override {
    if (!on_device(data, bytes)) return c_->host->recv_async(data, bytes, peer, tag);
    return transfer(/*send=*/false, data, bytes, peer, tag);
  }

  void barrier() override { c_->host->barrier(); }

 private:
  // One send (or receive) in its own NCCL group, on the link's channel for the tag's kind (the
  // channel's 2-rank communicator: the peer is rank 1 for a send, 0 for a receive) or the group's.
  WorkPtr transfer(bool send, void* data, int64_t bytes, int peer, int tag) {
    Channel* ch = send ? c_->channel(c_->rank, peer, tag) : c_->channel(peer, c_->rank, tag);
    return launch(
        CollKind::kSendRecv, send ? bytes : -1, peer, send ? tag : -tag - 1,
        [&](Core& c) {
          ncclComm_t comm = ch ? ch->comm : c.comm;
          cudaStream_t stream = ch ? ch->stream : c.stream;
          const auto n = static_cast<size_t>(bytes);
          c.nccl_ok(nccl().GroupStart(), "ncclGroupStart", comm);
          if (send)
            c.nccl_ok(nccl().Send(data, n, ncclUint8, ch ? 1 : peer, comm, stream), "ncclSend", comm);
          else
            c.nccl_ok(nccl().Recv(data, n, ncclUint8, ch ? 0 : peer, comm, stream), "ncclRecv", comm);
          c.nccl_ok(nccl().GroupEnd(), "ncclGroupEnd", comm);
        },
        ch);
  }

  static ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::kMax ? ncclMax : ncclSum; }
  // The 16-bit wires: NCCL's type, and the conversions into and out of the scratch (on the stream).
  static ncclDataType_t nccl_wire_type(Wire w) { return w == Wire::kF16 ? ncclFloat16 : ncclBfloat16; }
  static void to_wire(const ExecContext& x, Wire w, uint16_t* y, const float* v, int64_t n) {
    w == Wire::kF16 ? ops::to_fp16(x, y, v, n) : ops::to_bf16(x, y, v, n);
  }
  static void from_wire(const ExecContext& x, Wire w, float* y, const uint16_t* v, int64_t n) {
    w == Wire::kF16 ? ops::from_fp16(x, y, v, n) : ops::from_bf16(x, y, v, n);
  }

  // Whether NCCL should move this buffer: device memory, as the backend's DeviceMemory::contains
  // says (the test HostStagedComm makes too). Host buffers, and empty ones, go to the host
  // communicator.
  bool on_device(const void* p, int64_t n) const {
    return n > 0 && p != nullptr && mem_on_device(c_->compute.device, p);
  }

  // Enqueues one operation on the communication stream after the compute stream's work so far.
  // peer >= 0: a transfer (bytes < 0: a receive, which counts no bytes); else a collective, which
  // takes the group's next sequence number and marks this rank arrived once it is enqueued.
  template <class Enqueue>
  WorkPtr launch(CollKind kind, int64_t bytes, int peer, int tag, Enqueue&& enqueue, Channel* ch = nullptr) {
    Core& c = *c_;
    std::lock_guard<std::mutex> lock(c.mu);
    c.check_failed();
    cudaStream_t stream = ch ? ch->stream : c.stream;
    auto op = std::make_shared<Op>();
    op->kind = kind;
    op->peer = peer;
    op->tag = tag;
    op->ch = ch;
    op->timed = bytes >= 0;
    cuda_ok(cudaEventCreate(&op->start), "cudaEventCreate");
    cuda_ok(cudaEventCreate(&op->done), "cudaEventCreate");
    cuda_ok(cudaEventRecord(c.ready, static_cast<cudaStream_t>(c.compute.stream)), "cudaEventRecord");
#if !defined(FT_VGPU_NCCL_FAULTS)  // tests/vgpu's planted build: the virtual runtime must report the race
    cuda_ok(cudaStreamWaitEvent(stream, c.ready, 0), "cudaStreamWaitEvent");
#endif
    cuda_ok(cudaEventRecord(op->start, stream), "cudaEventRecord");
    enqueue(c);
    if (peer < 0) {
      op->seq = ++c.seq;
      c.board->arrive(op->seq);
    }
    cuda_ok(cudaEventRecord(op->done, stream), "cudaEventRecord");
    if (bytes >= 0) record(kind, bytes, 0);  // its time once it has finished (Core::query)
    c.outstanding.push_back(op);
    c.wake.notify_all();  // the watchdog
    return std::make_shared<NcclWork>(c_, std::move(op));
  }

  std::shared_ptr<Core> c_;
  CommStats host_base_;  // the host communicator's statistics before this one took it over
  std::thread watchdog_;
};

}  // namespace

std::shared_ptr<Communicator> make_nccl_comm(std::shared_ptr<Communicator> host, const ExecContext& compute,
                                             const CommOptions& opts) {
  return std::make_shared<NcclComm>(std::move(host), compute, opts);
}

}  // namespace ft

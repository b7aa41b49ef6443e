#include "parallel/comm/mpi_comm.h"

#include <mpi.h>
#include <time.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "parallel/comm/arrival_board.h"
#include "tensor/dtype.h"
#include "util/clock.h"
#include "util/log.h"

namespace ft {

bool MpiRuntime::launched_by_mpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") || std::getenv("PMIX_RANK");
}

MpiRuntime::MpiRuntime() {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    throw Error("the MPI library does not support MPI_THREAD_MULTIPLE",
                "use Debian's OpenMPI (openmpi-bin), which does");
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiRuntime::~MpiRuntime() {
  MPI_Finalize();
}

void MpiRuntime::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

namespace {

constexpr int kCollTag = 30000;  // tags of our collectives; user point-to-point tags stay below

// A pending operation: the communication thread completes it, callers wait.
class TaskWork final : public Work {
 public:
  explicit TaskWork(double timeout_s) : timeout_s_(timeout_s) {}
  void wait() override {
    std::unique_lock<std::mutex> lock(mu_);
    const double t0 = now_seconds();
    // The task bounds its own MPI waits; this bound only guards against a stuck thread.
    bool finished = cv_.wait_for(lock, std::chrono::duration<double>(2 * timeout_s_ + 10), [&] { return done_; });
    add_comm_blocked_seconds(now_seconds() - t0);
    if (!finished) throw CommError("communication thread did not finish an operation in time");
    if (!error_.empty()) throw CommError(error_, hint_);
  }
  bool done() override {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  void finish(std::string error = {}, std::string hint = {}) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
      error_ = std::move(error);
      hint_ = std::move(hint);
    }
    cv_.notify_all();
  }

 private:
  double timeout_s_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::string error_, hint_;
};

// Point-to-point requests of the calling thread, completed with a deadline.
class RequestWork final : public Work {
 public:
  RequestWork(MPI_Request r, std::function<void()> on_timeout_error, double timeout_s)
      : req_(r), describe_(std::move(on_timeout_error)), timeout_s_(timeout_s) {}
  void wait() override {
    const double t0 = now_seconds(), deadline = t0 + timeout_s_;
    int flag = 0, spins = 0;
    while (true) {
      MPI_Test(&req_, &flag, MPI_STATUS_IGNORE);
      if (flag) {
        add_comm_blocked_seconds(now_seconds() - t0);
        return;
      }
      if (now_seconds() > deadline) describe_();
      if (++spins > 64) {
        timespec ts{0, 20000};
        nanosleep(&ts, nullptr);
      }
    }
  }
  bool done() override {
    int flag = 0;
    MPI_Test(&req_, &flag, MPI_STATUS_IGNORE);
    return flag != 0;
  }

 private:
  MPI_Request req_;
  std::function<void()> describe_;
  double timeout_s_;
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, std::string name, const CommOptions& opts)
      : comm_(comm), name_(std::move(name)), opts_(opts) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Group g, wg;
    MPI_Comm_group(comm_, &g);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    std::vector<int> mine(static_cast<size_t>(size_)), world(static_cast<size_t>(size_));
    for (int i = 0; i < size_; ++i) mine[static_cast<size_t>(i)] = i;
    MPI_Group_translate_ranks(g, size_, mine.data(), wg, world.data());
    world_ranks_ = world;
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    board_ = std::make_unique<ArrivalBoard>(opts.board_dir, fmt::format("{}-{}", name_, world_ranks_[0]), size_, rank_);
    worker_ = std::thread([this] { loop(); });
  }

  ~MpiCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
    MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  int world_rank_of(int i) const override { return world_ranks_[static_cast<size_t>(i)]; }

  WorkPtr all_reduce_async(float* data, int64_t n, ReduceOp op, Wire wire) override {
    return submit(CollKind::kAllReduce, [=, this](Op& o) { ring_all_reduce(o, data, n, op, wire); });
  }
  WorkPtr all_reduce_async(double* data, int64_t n, ReduceOp op) override {
    return submit(CollKind::kAllReduce, [=, this](Op& o) {
      MPI_Request r;
      MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_DOUBLE, op == ReduceOp::kSum ? MPI_SUM : MPI_MAX,
                     comm_, &r);
      complete(o, &r, 1, -1);
      o.bytes += 2 * (size_ - 1) * n * 8 / size_;
    });
  }
  WorkPtr reduce_scatter_async(float* out, const float* in, int64_t n, Wire wire) override {
    return submit(CollKind::kReduceScatter, [=, this](Op& o) { ring_reduce_scatter(o, out, in, n, wire); });
  }
  WorkPtr all_gather_async(void* out, const void* in, int64_t bytes) override {
    return submit(CollKind::kAllGather, [=, this](Op& o) { ring_all_gather(o, out, in, bytes); });
  }
  WorkPtr broadcast_async(void* data, int64_t bytes, int root) override {
    return submit(CollKind::kBroadcast, [=, this](Op& o) { tree_broadcast(o, data, bytes, root); });
  }
  WorkPtr send_async(const void* data, int64_t bytes, int peer, int tag) override {
    MPI_Request r;
    check(MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, peer, tag, comm_, &r), "send");
    record(CollKind::kSendRecv, bytes, 0);
    return std::make_shared<RequestWork>(
        r, [=, this] { timeout_p2p("send to", peer, tag); }, opts_.timeout_s);
  }
  WorkPtr recv_async(void* data, int64_t bytes, int peer, int tag) override {
    MPI_Request r;
    check(MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, peer, tag, comm_, &r), "receive");
    return std::make_shared<RequestWork>(
        r, [=, this] { timeout_p2p("receive from", peer, tag); }, opts_.timeout_s);
  }
  void barrier() override {
    submit(CollKind::kBarrier, [this](Op& o) {
      MPI_Request r;
      MPI_Ibarrier(comm_, &r);
      complete(o, &r, 1, -1);
    })->wait();
  }

 private:
  struct Op {
    CollKind kind;
    int64_t seq;
    int64_t bytes = 0;
    std::function<void(Op&)> body;
    std::shared_ptr<TaskWork> work;
  };

  WorkPtr submit(CollKind kind, std::function<void(Op&)> body) {
    auto w = std::make_shared<TaskWork>(opts_.timeout_s);
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(Op{kind, ++submitted_, 0, std::move(body), w});
    }
    cv_.notify_one();
    return w;
  }

  void loop() {
    while (true) {
      Op op;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        op = std::move(queue_.front());
        queue_.pop_front();
      }
      board_->arrive(op.seq);
      double t0 = now_seconds();
      try {
        if (failed_.empty())
          op.body(op);
        else
          throw CommError(failed_);
        board_->finish(op.seq);
        record(op.kind, op.bytes, now_seconds() - t0);
        op.work->finish();
      } catch (const Error& e) {
        failed_ = e.what();  // later operations of this group fail fast
        op.work->finish(e.what(), e.hint());
      }
    }
  }

  static void check(int rc, const char* what) {
    if (rc != MPI_SUCCESS) {
      char msg[MPI_MAX_ERROR_STRING];
      int len = 0;
      MPI_Error_string(rc, msg, &len);
      throw CommError(fmt::format("MPI {} failed: {}", what, std::string(msg, static_cast<size_t>(len))));
    }
  }

  // Waits for requests with the collective timeout; on expiry names the ranks holding it up.
  void complete(Op& o, MPI_Request* reqs, int count, int waiting_for) {
    double deadline = now_seconds() + opts_.timeout_s;
    int flag = 0, spins = 0;
    while (true) {
      check(MPI_Testall(count, reqs, &flag, MPI_STATUSES_IGNORE), coll_kind_name(o.kind));
      if (flag) return;
      if (now_seconds() > deadline) timeout(o, waiting_for);
      if (++spins > 64) {
        timespec ts{0, 20000};
        nanosleep(&ts, nullptr);
      }
    }
  }

  [[noreturn]] void timeout(const Op& o, int waiting_for) {
    // Who holds it up: ranks that never entered it; else ranks that entered it and never left
    // (stopped inside); else the peer this rank's transfer waits for; else, when every peer left
    // it yet this rank's part cannot finish (a library collective, MPI's own, needs its peers'
    // progress after they leave), the peers that never reached the next collective.
    throw collective_timeout_error(world_rank_of(rank_), o.kind, o.seq, name_, world_ranks_, "", opts_.timeout_s,
                                   board_->holding_up(o.seq, waiting_for, world_ranks_));
  }

  [[noreturn]] void timeout_p2p(const char* what, int peer, int tag) {
    throw CommError(fmt::format("rank {}: {} world rank {} (tag {}) on group {} timed out after {:.0f} s",
                                world_rank_of(rank_), what, world_rank_of(peer), tag, name_, opts_.timeout_s),
                    "the peer died or hangs; the bound is parallel.collective_timeout_s");
  }

  // One ring step: send `send_bytes` to the right neighbour, receive into recv from the left.
  void ring_exchange(Op& o, const void* send, int64_t send_bytes, void* recv, int64_t recv_bytes) {
    int right = (rank_ + 1) % size_, left = (rank_ - 1 + size_) % size_;
    MPI_Request r[2];
    check(MPI_Irecv(recv, static_cast<int>(recv_bytes), MPI_BYTE, left, kCollTag, comm_, &r[0]), "ring receive");
    check(MPI_Isend(send, static_cast<int>(send_bytes), MPI_BYTE, right, kCollTag, comm_, &r[1]), "ring send");
    complete(o, r, 2, left);
    o.bytes += send_bytes;
  }

  int64_t chunk_begin(int64_t n, int c) const { return n * c / size_; }

  float* scratch(size_t floats, int which) {
    auto& v = scratch_[which];
    if (v.size() < floats) v.resize(floats);
    return v.data();
  }

  // Sends floats as fp32, bf16 or fp16; the receiver gets fp32 back in `into` (accumulated in fp32,
  // or copied).
  void exchange_floats(Op& o, const float* send, int64_t ns, float* into, int64_t nr, Wire wire, bool accumulate) {
    if (wire == Wire::kF32) {
      float* tmp = accumulate ? scratch(static_cast<size_t>(nr), 0) : into;
      ring_exchange(o, send, ns * 4, tmp, nr * 4);
      if (accumulate)
        for (int64_t i = 0; i < nr; ++i) into[i] += tmp[i];
      return;
    }
    const DType t = wire_dtype(wire);
    auto* s16 = reinterpret_cast<uint16_t*>(scratch(static_cast<size_t>(ns + 1) / 2, 1));
    auto* r16 = reinterpret_cast<uint16_t*>(scratch(static_cast<size_t>(nr + 1) / 2, 2));
    convert(s16, t, send, DType::kF32, static_cast<size_t>(ns));
    ring_exchange(o, s16, ns * 2, r16, nr * 2);
    if (accumulate) {
      float* tmp = scratch(static_cast<size_t>(nr), 0);
      convert(tmp, DType::kF32, r16, t, static_cast<size_t>(nr));
      for (int64_t i = 0; i < nr; ++i) into[i] += tmp[i];
    } else {
      convert(into, DType::kF32, r16, t, static_cast<size_t>(nr));
    }
  }

  // x(n) = fp32(wire(x(n))): what the 16-bit wire would deliver of it.
  void round_to_wire(float* x, int64_t n, Wire wire) {
    auto* h = reinterpret_cast<uint16_t*>(scratch(static_cast<size_t>(n + 1) / 2, 1));
    convert(h, wire_dtype(wire), x, DType::kF32, static_cast<size_t>(n));
    convert(x, DType::kF32, h, wire_dtype(wire), static_cast<size_t>(n));
  }

  static DType wire_dtype(Wire w) { return w == Wire::kF16 ? DType::kF16 : DType::kBF16; }

  // Reduce-scatter phase: afterwards rank r holds the full sum of chunk r of data.
  void ring_reduce_phase(Op& o, float* data, int64_t n, ReduceOp op, Wire wire) {
    for (int s = 0; s < size_ - 1; ++s) {
      int sc = ((rank_ - s - 1) % size_ + size_) % size_, rc = ((rank_ - s - 2) % size_ + size_) % size_;
      int64_t sb = chunk_begin(n, sc), se = chunk_begin(n, sc + 1), rb = chunk_begin(n, rc),
              re = chunk_begin(n, rc + 1);
      if (op == ReduceOp::kSum) {
        exchange_floats(o, data + sb, se - sb, data + rb, re - rb, wire, true);
      } else {
        float* tmp = scratch(static_cast<size_t>(re - rb), 3);
        ring_exchange(o, data + sb, (se - sb) * 4, tmp, (re - rb) * 4);
        for (int64_t i = 0; i < re - rb; ++i) data[rb + i] = std::max(data[rb + i], tmp[i]);
      }
    }
  }

  void ring_all_reduce(Op& o, float* data, int64_t n, ReduceOp op, Wire wire) {
    if (size_ == 1 || n == 0) return;
    if (op == ReduceOp::kMax) wire = Wire::kF32;
    ring_reduce_phase(o, data, n, op, wire);
    if (wire != Wire::kF32) {  // every replica must hold identical values: round the owned chunk too
      int64_t b = chunk_begin(n, rank_), e = chunk_begin(n, rank_ + 1);
      round_to_wire(data + b, e - b, wire);  // an fp16 sum past 65504 is ±inf here as on the others
    }
    for (int s = 0; s < size_ - 1; ++s) {
      int sc = ((rank_ - s) % size_ + size_) % size_, rc = ((rank_ - s - 1) % size_ + size_) % size_;
      int64_t sb = chunk_begin(n, sc), se = chunk_begin(n, sc + 1), rb = chunk_begin(n, rc),
              re = chunk_begin(n, rc + 1);
      exchange_floats(o, data + sb, se - sb, data + rb, re - rb, wire, false);
    }
  }

  void ring_reduce_scatter(Op& o, float* out, const float* in, int64_t n, Wire wire) {
    // Work on a copy of the input so `in` stays untouched; blocks are exactly n apart.
    std::vector<float>& acc = scratch_[4];
    acc.assign(in, in + n * size_);
    for (int s = 0; s < size_ - 1; ++s) {
      int sc = ((rank_ - s - 1) % size_ + size_) % size_, rc = ((rank_ - s - 2) % size_ + size_) % size_;
      exchange_floats(o, acc.data() + sc * n, n, acc.data() + rc * n, n, wire, true);
    }
    std::memcpy(out, acc.data() + static_cast<int64_t>(rank_) * n, static_cast<size_t>(n) * 4);
    // fp16: the result is an fp16 value, as NCCL's (ncclFloat16) is, so a sum past 65504 is inf on
    // either transport and the loss scaler sees it. (bf16 keeps the fp32 sum: no range to lose.)
    if (wire == Wire::kF16 && size_ > 1) round_to_wire(out, n, wire);
  }

  void ring_all_gather(Op& o, void* out, const void* in, int64_t bytes) {
    char* o8 = static_cast<char*>(out);
    if (o8 + rank_ * bytes != in) std::memmove(o8 + rank_ * bytes, in, static_cast<size_t>(bytes));
    for (int s = 0; s < size_ - 1; ++s) {
      int sc = ((rank_ - s) % size_ + size_) % size_, rc = ((rank_ - s - 1) % size_ + size_) % size_;
      ring_exchange(o, o8 + sc * bytes, bytes, o8 + rc * bytes, bytes);
    }
  }

  // Binomial tree rooted at `root`.
  void tree_broadcast(Op& o, void* data, int64_t bytes, int root) {
    int me = (rank_ - root + size_) % size_;
    int mask = 1;
    while (mask < size_) {
      if (me & mask) {
        int src = (me - mask + root) % size_;
        MPI_Request r;
        check(MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, src, kCollTag + 1, comm_, &r), "broadcast");
        complete(o, &r, 1, src);
        break;
      }
      mask <<= 1;
    }
    mask >>= 1;
    while (mask > 0) {
      if (me + mask < size_) {
        int dst = (me + mask + root) % size_;
        MPI_Request r;
        check(MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, dst, kCollTag + 1, comm_, &r), "broadcast");
        complete(o, &r, 1, dst);
        o.bytes += bytes;
      }
      mask >>= 1;
    }
  }

  MPI_Comm comm_;
  std::string name_;
  CommOptions opts_;
  int rank_ = 0, size_ = 1;
  std::vector<int> world_ranks_;
  std::unique_ptr<ArrivalBoard> board_;
  std::vector<float> scratch_[5];
  std::string failed_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> queue_;
  int64_t submitted_ = 0;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace

std::unique_ptr<Communicator> mpi_world(const std::string& name, const CommOptions& opts) {
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  return std::make_unique<MpiCommunicator>(c, name, opts);
}

std::unique_ptr<Communicator> mpi_split(int color, int key, const std::string& name, const CommOptions& opts) {
  MPI_Comm c;
  MPI_Comm_split(MPI_COMM_WORLD, color, key, &c);
  return std::make_unique<MpiCommunicator>(c, name, opts);
}

void mpi_native_all_reduce(float* data, int64_t n) {
  MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

}  // namespace ft

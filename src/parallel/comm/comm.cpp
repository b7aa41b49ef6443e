#include "parallel/comm/comm.h"

#include <cstring>

namespace ft {

const char* coll_kind_name(CollKind k) {
  switch (k) {
    case CollKind::kAllReduce:
      return "all_reduce";
    case CollKind::kReduceScatter:
      return "reduce_scatter";
    case CollKind::kAllGather:
      return "all_gather";
    case CollKind::kBroadcast:
      return "broadcast";
    case CollKind::kSendRecv:
      return "send_recv";
    case CollKind::kBarrier:
      return "barrier";
    case CollKind::kCount:
      break;
  }
  return "?";
}

namespace {
thread_local double t_blocked_s = 0;
thread_local int64_t t_host_waits = 0;
std::mutex g_failure_mu;
CommFailureHandler g_failure_handler;
}  // namespace

void set_comm_failure_handler(CommFailureHandler handler) {
  std::lock_guard<std::mutex> lock(g_failure_mu);
  g_failure_handler = std::move(handler);
}

void report_comm_failure(const CommError& e) {
  CommFailureHandler h;
  {
    std::lock_guard<std::mutex> lock(g_failure_mu);
    h = g_failure_handler;
  }
  if (h) h(e);
}

double comm_blocked_seconds() {
  return t_blocked_s;
}
int64_t comm_host_waits() {
  return t_host_waits;
}
void add_comm_blocked_seconds(double seconds) {
  t_blocked_s += seconds;
  ++t_host_waits;
}

CommStats& CommStats::operator+=(const CommStats& o) {
  for (size_t i = 0; i < kNumCollKinds; ++i) {
    bytes_sent[i] += o.bytes_sent[i];
    calls[i] += o.calls[i];
    seconds[i] += o.seconds[i];
  }
  return *this;
}

CommStats CommStats::operator-(const CommStats& o) const {
  CommStats r = *this;
  for (size_t i = 0; i < kNumCollKinds; ++i) {
    r.bytes_sent[i] -= o.bytes_sent[i];
    r.calls[i] -= o.calls[i];
    r.seconds[i] -= o.seconds[i];
  }
  return r;
}

int64_t CommStats::total_bytes() const {
  int64_t t = 0;
  for (int64_t b : bytes_sent) t += b;
  return t;
}

CommStats Communicator::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

void Communicator::record(CollKind k, int64_t bytes, double seconds) {
  std::lock_guard<std::mutex> lock(stats_mu_);
  size_t i = static_cast<size_t>(k);
  stats_.bytes_sent[i] += bytes;
  stats_.calls[i] += 1;
  stats_.seconds[i] += seconds;
}

namespace {

class DoneWork final : public Work {
 public:
  void wait() override {}
  bool done() override { return true; }
};

class SelfCommunicator final : public Communicator {
 public:
  SelfCommunicator(std::string name, int world_rank) : name_(std::move(name)), world_rank_(world_rank) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::string& name() const override { return name_; }
  int world_rank_of(int) const override { return world_rank_; }
  WorkPtr all_reduce_async(float*, int64_t, ReduceOp, Wire) override { return done(); }
  WorkPtr all_reduce_async(double*, int64_t, ReduceOp) override { return done(); }
  WorkPtr reduce_scatter_async(float* out, const float* in, int64_t n, Wire) override {
    if (out != in) std::memmove(out, in, static_cast<size_t>(n) * 4);
    return done();
  }
  WorkPtr all_gather_async(void* out, const void* in, int64_t bytes) override {
    if (out != in) std::memmove(out, in, static_cast<size_t>(bytes));
    return done();
  }
  WorkPtr broadcast_async(void*, int64_t, int) override { return done(); }
  WorkPtr send_async(const void*, int64_t, int peer, int) override {
    throw Error(fmt::format("send to rank {} in the size-1 group {}", peer, name_));
  }
  WorkPtr recv_async(void*, int64_t, int peer, int) override {
    throw Error(fmt::format("receive from rank {} in the size-1 group {}", peer, name_));
  }
  void barrier() override {}

 private:
  static WorkPtr done() { return std::make_shared<DoneWork>(); }
  std::string name_;
  int world_rank_;
};

}  // namespace

std::unique_ptr<Communicator> make_self_communicator(const std::string& name, int world_rank) {
  return std::make_unique<SelfCommunicator>(name, world_rank);
}

}  // namespace ft

#include "dryrun/fake_comm.h"

#include <cstring>

#include "util/error.h"

namespace ft {
namespace {

class DoneWork : public Work {
 public:
  void wait() override {}
  bool done() override { return true; }
};

WorkPtr done() {
  return std::make_shared<DoneWork>();
}

}  // namespace

FakeCommunicator::FakeCommunicator(std::string name, std::vector<int> world_ranks, int index, bool zero_received)
    : name_(std::move(name)), members_(std::move(world_ranks)), index_(index), zero_received_(zero_received) {}

int64_t FakeCommunicator::bytes_sent(const plan::CollRecord& c, int index, int size) {
  const int64_t p = size, n = c.count;
  if (p == 1) return c.op == plan::CollOp::kSend ? n : 0;
  switch (c.op) {
    case plan::CollOp::kAllReduce: {
      if (c.element_bytes == 8) return 2 * (p - 1) * n * 8 / p;  // MPI_Iallreduce, counted as a ring would send it
      // The ring's chunks exactly, chunk c = [n·c/P, n·(c+1)/P): the reduce phase sends every
      // chunk but the rank's own, the gather phase every chunk but the next rank's.
      const int64_t bytes = c.reduce_max ? 4 : c.element_bytes;
      auto chunk = [&](int64_t k) { return n * (k + 1) / p - n * k / p; };
      return (2 * n - chunk(index) - chunk((index + 1) % p)) * bytes;
    }
    case plan::CollOp::kReduceScatter:
      return (p - 1) * n * c.element_bytes;
    case plan::CollOp::kAllGather:
      return (p - 1) * n;
    case plan::CollOp::kBroadcast: {
      // The binomial tree: a rank sends to me + mask for every mask below its lowest set bit.
      const int64_t me = (index - c.root + p) % p;
      int64_t mask = 1;
      while (mask < p && !(me & mask)) mask <<= 1;
      int64_t sends = 0;
      for (mask >>= 1; mask > 0; mask >>= 1) sends += me + mask < p;
      return sends * n;
    }
    case plan::CollOp::kSend:
      return n;
    case plan::CollOp::kRecv:
    case plan::CollOp::kBarrier:
      return 0;
  }
  return 0;
}

CollKind FakeCommunicator::stats_kind(plan::CollOp op) {
  switch (op) {
    case plan::CollOp::kAllReduce:
      return CollKind::kAllReduce;
    case plan::CollOp::kReduceScatter:
      return CollKind::kReduceScatter;
    case plan::CollOp::kAllGather:
      return CollKind::kAllGather;
    case plan::CollOp::kBroadcast:
      return CollKind::kBroadcast;
    case plan::CollOp::kSend:
    case plan::CollOp::kRecv:
      return CollKind::kSendRecv;
    case plan::CollOp::kBarrier:
      return CollKind::kBarrier;
  }
  return CollKind::kBarrier;
}

WorkPtr FakeCommunicator::issue(plan::CollRecord call) {
  // What the communicators' stats count as a call: not a receive, nor a float all-reduce that
  // has nothing to send, nor a reduce-scatter in a group of one.
  const bool alone = size() == 1;
  const bool counted =
      call.op != plan::CollOp::kRecv &&
      !(call.op == plan::CollOp::kAllReduce && call.element_bytes != 8 && (alone || call.count == 0)) &&
      !(call.op == plan::CollOp::kReduceScatter && alone);
  if (counted) record(stats_kind(call.op), bytes_sent(call, index_, size()), 0);
  if (log_) {
    call.group = name_;
    log_->push_back(std::move(call));
  }
  return done();
}

WorkPtr FakeCommunicator::all_reduce_async(float*, int64_t n, ReduceOp op, Wire wire) {
  return issue({.group = {},
                .op = plan::CollOp::kAllReduce,
                .count = n,
                .element_bytes = static_cast<int>(wire_bytes(wire)),
                .reduce_max = op == ReduceOp::kMax});
}

WorkPtr FakeCommunicator::all_reduce_async(double*, int64_t n, ReduceOp op) {
  return issue({.group = {},
                .op = plan::CollOp::kAllReduce,
                .count = n,
                .element_bytes = 8,
                .reduce_max = op == ReduceOp::kMax});
}

WorkPtr FakeCommunicator::reduce_scatter_async(float*, const float*, int64_t n, Wire wire) {
  return issue({.group = {},
                .op = plan::CollOp::kReduceScatter,
                .count = n,
                .element_bytes = static_cast<int>(wire_bytes(wire))});
}

WorkPtr FakeCommunicator::all_gather_async(void*, const void*, int64_t bytes) {
  return issue({.group = {}, .op = plan::CollOp::kAllGather, .count = bytes});
}

WorkPtr FakeCommunicator::broadcast_async(void*, int64_t bytes, int root) {
  return issue({.group = {}, .op = plan::CollOp::kBroadcast, .count = bytes, .root = root});
}

WorkPtr FakeCommunicator::send_async(const void*, int64_t bytes, int peer, int) {
  return issue({.group = {}, .op = plan::CollOp::kSend, .count = bytes, .peer = peer});
}

WorkPtr FakeCommunicator::recv_async(void* data, int64_t bytes, int peer, int) {
  if (zero_received_ && data != nullptr && bytes > 0) std::memset(data, 0, static_cast<size_t>(bytes));
  return issue({.group = {}, .op = plan::CollOp::kRecv, .count = bytes, .peer = peer});
}

void FakeCommunicator::barrier() {
  issue({.group = {}, .op = plan::CollOp::kBarrier});
}

Mesh fake_mesh(const ParallelConfig& p, int world_rank, bool zero_received) {
  return Mesh::create_with(p, world_rank,
                           [zero_received](const std::string& name, const std::vector<int>& members, int index) {
                             return std::make_shared<FakeCommunicator>(name, members, index, zero_received);
                           });
}

void log_collectives(Mesh& mesh, std::vector<plan::CollRecord>* log) {
  std::vector<Communicator*> groups = {&mesh.world(), &mesh.dp(), &mesh.tp(), &mesh.pp()};
  if (mesh.degrees().cp > 1) groups.insert(groups.end(), {&mesh.cp(), &mesh.dp_cp()});  // else: dp_cp is dp
  for (Communicator* c : groups) {
    auto* f = dynamic_cast<FakeCommunicator*>(c);
    FT_CHECK(f != nullptr, "the {} group is not a fake communicator", c->name());
    f->set_log(log);
  }
}

}  // namespace ft

#include "dryrun/fake_comm.h"

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

FakeCommunicator::FakeCommunicator(std::string name, std::vector<int> world_ranks, int index)
    : name_(std::move(name)), members_(std::move(world_ranks)), index_(index) {}

WorkPtr FakeCommunicator::all_reduce_async(float*, int64_t n, ReduceOp op, Wire wire) {
  // The ring's chunks exactly: the reduce phase sends chunk (r − s − 1), the gather phase
  // chunk (r − s), s = 0 … P−2, chunk c = [n·c/P, n·(c+1)/P).
  const int p = size();
  if (p == 1 || n == 0) return done();
  if (op == ReduceOp::kMax) wire = Wire::kF32;
  auto chunk = [&](int c) { return n * (c + 1) / p - n * c / p; };
  int64_t elems = 0;
  for (int s = 0; s < p - 1; ++s) elems += chunk(((index_ - s - 1) % p + p) % p) + chunk(((index_ - s) % p + p) % p);
  record(CollKind::kAllReduce, elems * wire_bytes(wire), 0);
  return done();
}

WorkPtr FakeCommunicator::all_reduce_async(double*, int64_t n, ReduceOp) {
  const int64_t p = size();  // MPI_Iallreduce, counted as a ring would send it
  record(CollKind::kAllReduce, 2 * (p - 1) * n * 8 / p, 0);
  return done();
}

WorkPtr FakeCommunicator::reduce_scatter_async(float*, const float*, int64_t n, Wire wire) {
  if (size() == 1) return done();
  record(CollKind::kReduceScatter, (size() - 1) * n * wire_bytes(wire), 0);
  return done();
}

WorkPtr FakeCommunicator::all_gather_async(void*, const void*, int64_t bytes) {
  record(CollKind::kAllGather, (size() - 1) * bytes, 0);
  return done();
}

WorkPtr FakeCommunicator::broadcast_async(void*, int64_t bytes, int root) {
  // The binomial tree: a rank sends to me + mask for every mask below its lowest set bit.
  const int p = size(), me = (index_ - root + p) % p;
  int mask = 1;
  while (mask < p && !(me & mask)) mask <<= 1;
  int64_t sends = 0;
  for (mask >>= 1; mask > 0; mask >>= 1) sends += me + mask < p;
  record(CollKind::kBroadcast, sends * bytes, 0);
  return done();
}

WorkPtr FakeCommunicator::send_async(const void*, int64_t bytes, int, int) {
  record(CollKind::kSendRecv, bytes, 0);
  return done();
}

WorkPtr FakeCommunicator::recv_async(void*, int64_t, int, int) {
  return done();
}

void FakeCommunicator::barrier() {
  record(CollKind::kBarrier, 0, 0);
}

Mesh fake_mesh(const ParallelConfig& p, int world_rank) {
  return Mesh::create_with(p, world_rank, [](const std::string& name, const std::vector<int>& members, int index) {
    return std::make_shared<FakeCommunicator>(name, members, index);
  });
}

}  // namespace ft

#include "dryrun/comm_sweep.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "dryrun/fake_comm.h"
#include "parallel/comm/comm.h"

namespace ft {

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The least over `repeats` calls of fn on every rank of the group, then the slowest rank's.
template <class Fn>
double time_call(Communicator& group, int repeats, Fn fn) {
  double best = 1e30;
  for (int r = 0; r < repeats + 1; ++r) {  // the first call warms up (buffers, connections)
    group.barrier();
    const double t0 = now();
    fn();
    const double t = now() - t0;
    if (r > 0) best = std::min(best, t);
  }
  group.all_reduce(&best, 1, ReduceOp::kMax);
  return best;
}

}  // namespace

std::string profile_collective_name(plan::CollOp op) {
  switch (op) {
    case plan::CollOp::kAllReduce:
    case plan::CollOp::kBroadcast:
    case plan::CollOp::kBarrier:
      return "all_reduce";
    case plan::CollOp::kReduceScatter:
      return "reduce_scatter";
    case plan::CollOp::kAllGather:
      return "all_gather";
    case plan::CollOp::kSend:
      return "send";
    case plan::CollOp::kRecv:
      return "";
  }
  return "";
}

std::map<std::string, std::map<std::string, plan::CollectiveFit>> sweep_collectives(Mesh& mesh, int repeats) {
  std::map<std::string, std::map<std::string, plan::CollectiveFit>> out;
  std::vector<std::pair<std::string, Communicator*>> axes = {
      {"dp", &mesh.dp()}, {"tp", &mesh.tp()}, {"pp", &mesh.pp()}};
  if (mesh.degrees().cp > 1) axes.insert(axes.end(), {{"cp", &mesh.cp()}, {"dp_cp", &mesh.dp_cp()}});
  for (auto& [axis, g] : axes) {
    const int p = g->size(), me = g->rank();
    if (p < 2) continue;
    std::map<std::string, std::vector<std::pair<double, double>>> points;
    for (int64_t bytes = int64_t{4} << 10; bytes <= int64_t{16} << 20; bytes *= 4) {
      const int64_t n = bytes / 4;  // fp32 elements of the whole buffer
      std::vector<float> buf(static_cast<size_t>(n), 1.0f), part(static_cast<size_t>(n / p + 1), 1.0f);
      auto add = [&](plan::CollOp op, int64_t count, const char* name, double seconds) {
        const plan::CollRecord call{.group = axis, .op = op, .count = count};
        points[name].emplace_back(static_cast<double>(FakeCommunicator::bytes_sent(call, me, p)), seconds);
      };
      add(plan::CollOp::kAllReduce, n, "all_reduce", time_call(*g, repeats, [&] { g->all_reduce(buf.data(), n); }));
      if (axis == "cp") {  // the ring's hop: every rank sends to the next while receiving from the previous
        std::vector<float> in(static_cast<size_t>(n), 0.0f);
        const double s = time_call(*g, repeats, [&] {
          WorkPtr r = g->recv_async(in.data(), bytes, (me + p - 1) % p, 9);
          WorkPtr w = g->send_async(buf.data(), bytes, (me + 1) % p, 9);
          r->wait();
          w->wait();
        });
        points["send"].emplace_back(static_cast<double>(bytes), s);
        continue;  // the cp group's other collectives are the step's few-double sums
      }
      const int64_t shard = n / p;
      add(plan::CollOp::kReduceScatter, shard, "reduce_scatter",
          time_call(*g, repeats, [&] { g->reduce_scatter(part.data(), buf.data(), shard); }));
      add(plan::CollOp::kAllGather, shard * 4, "all_gather",
          time_call(*g, repeats, [&] { g->all_gather(buf.data(), part.data(), shard * 4); }));
      if (axis == "pp") {  // a ping-pong between neighbours: half the round trip is one send
        const int peer = me ^ 1;
        const double rt = time_call(*g, repeats, [&] {
          if (peer >= p) return;
          if (me % 2 == 0) {
            g->send(buf.data(), bytes, peer, 7);
            g->recv(buf.data(), bytes, peer, 8);
          } else {
            g->recv(buf.data(), bytes, peer, 7);
            g->send(buf.data(), bytes, peer, 8);
          }
        });
        points["send"].emplace_back(static_cast<double>(bytes), rt / 2);
      }
    }
    for (auto& [name, pts] : points) out[axis][name] = plan::fit_collective(std::move(pts));
  }
  return out;
}

}  // namespace ft

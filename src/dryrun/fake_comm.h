// FakeCommunicator: a Communicator without a transport, for dry runs (`fluxtrain train --dry-run`)
// and step traces (dryrun/step_trace.h): one process stands in for every rank, so nothing is sent
// and no data is touched (pointers may be null). Each call only counts the bytes this rank would
// send, by the same algorithms as the MPI communicator (parallel/comm/mpi_comm.cpp): a ring
// all-reduce sends 2(P−1)/P of the buffer, a ring reduce-scatter or all-gather P−1 blocks, a send
// its bytes. stats() reads them as usual; with a log set, every call is also appended to it as a
// plan::CollRecord (its arguments), which bytes_sent() prices again for any rank of a group.
//
//   auto dp = std::make_shared<FakeCommunicator>("dp", std::vector<int>{1, 3}, 0);
//   dp->all_reduce(nullptr, n);                 // counts 2·(2−1)/2 · 4n bytes
//   dp->stats().bytes_sent[...]
//   FakeCommunicator::bytes_sent(call, 1, 2);   // what the group's rank 1 sends for the same call
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "parallel/comm/comm.h"
#include "parallel/mesh.h"
#include "plan/op_trace.h"

namespace ft {

class FakeCommunicator : public Communicator {
 public:
  // zero_received: a receive writes zeros into its (host) buffer — for a step that runs its ops
  // for real on the CPU (timed), never for the recording GPU's buffers.
  FakeCommunicator(std::string name, std::vector<int> world_ranks, int index, bool zero_received = false);

  int rank() const override { return index_; }
  int size() const override { return static_cast<int>(members_.size()); }
  const std::string& name() const override { return name_; }
  int world_rank_of(int i) const override { return members_[static_cast<size_t>(i)]; }

  WorkPtr all_reduce_async(float* data, int64_t n, ReduceOp op, Wire wire) override;
  WorkPtr all_reduce_async(double* data, int64_t n, ReduceOp op) override;
  WorkPtr reduce_scatter_async(float* out, const float* in, int64_t n, Wire wire) override;
  WorkPtr all_gather_async(void* out, const void* in, int64_t bytes) override;
  WorkPtr broadcast_async(void* data, int64_t bytes, int root) override;
  WorkPtr send_async(const void* data, int64_t bytes, int peer, int tag) override;
  WorkPtr recv_async(void* data, int64_t bytes, int peer, int tag) override;
  void barrier() override;

  // Appends every call from now on to `log` (nullptr: stops); the record's group is this
  // communicator's name.
  void set_log(std::vector<plan::CollRecord>* log) { log_ = log; }

  // The bytes the rank at `index` of a group of `size` sends for `call` (O(1)), and the kind of
  // collective its stats count them under.
  static int64_t bytes_sent(const plan::CollRecord& call, int index, int size);
  static CollKind stats_kind(plan::CollOp op);

 private:
  std::string name_;
  std::vector<int> members_;
  int index_;
  bool zero_received_ = false;
  std::vector<plan::CollRecord>* log_ = nullptr;
  WorkPtr issue(plan::CollRecord call);
};

// The mesh of world rank `world_rank` under `p`, every group a FakeCommunicator (zero_received: as
// the constructor's).
Mesh fake_mesh(const ParallelConfig& p, int world_rank, bool zero_received = false);
// Sets (or clears: nullptr) the log of each of the mesh's groups (world, dp, tp, pp; with cp > 1
// also cp and dp_cp).
void log_collectives(Mesh& mesh, std::vector<plan::CollRecord>* log);

}  // namespace ft

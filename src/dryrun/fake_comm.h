// FakeCommunicator: a Communicator without a transport, for dry runs (`fluxtrain train --dry-run`):
// one process stands in for every rank, so nothing is sent and no data is touched (pointers may
// be null). Each call only counts the bytes this rank would send, by the same algorithms as the
// MPI communicator (parallel/comm/mpi_comm.cpp): a ring all-reduce sends 2(P−1)/P of the buffer, a ring
// reduce-scatter or all-gather P−1 blocks, a send its bytes. stats() reads them as usual.
//
//   auto dp = std::make_shared<FakeCommunicator>("dp", std::vector<int>{1, 3}, 0);
//   dp->all_reduce(nullptr, n);                 // counts 2·(2−1)/2 · 4n bytes
//   dp->stats().bytes_sent[...]
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "parallel/comm/comm.h"
#include "parallel/mesh.h"

namespace ft {

class FakeCommunicator : public Communicator {
 public:
  FakeCommunicator(std::string name, std::vector<int> world_ranks, int index);

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

 private:
  std::string name_;
  std::vector<int> members_;
  int index_;
};

// The mesh of world rank `world_rank` under `p`, every group a FakeCommunicator.
Mesh fake_mesh(const ParallelConfig& p, int world_rank);

}  // namespace ft

// MPI for CPU ranks: process start-up (MpiRuntime) and communicators over groups of ranks.
// Collectives are our own ring / tree algorithms over MPI point-to-point messages, run on one
// communication thread per communicator; MPI is the transport (shared memory on one node, TCP
// or InfiniBand between nodes). That makes every byte on the wire ours to count, and lets
// fp32 data travel as bf16.
//
//   MpiRuntime mpi;                                     // MPI_Init_thread(MULTIPLE), once
//   auto dp = mpi_split(color, key, "dp", opts);        // collective over the world
#pragma once

#include <memory>
#include <string>

#include "parallel/comm/comm.h"

namespace ft {

struct CommOptions {
  double timeout_s = 300;  // bound on every wait; a hung or dead peer becomes a CommError
  std::string board_dir;   // ArrivalBoard directory ("" = off); shared by the ranks of a node
  // A transport without tags (NCCL): give each direction of each link to the neighbouring ranks
  // of the group its own channels, one for even tags (the pipeline's activations) and one for odd
  // (its gradients), so that transfers of one kind never wait behind the other's (the pp group).
  bool p2p_channels = false;
};

class MpiRuntime {
 public:
  // True when this process was started by mpirun/srun (the environment says so).
  static bool launched_by_mpi();
  MpiRuntime();
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }
  // Ends every rank of the job (used after an unrecoverable communication error).
  [[noreturn]] static void abort(int code);

 private:
  int rank_ = 0, size_ = 1;
};

// The world communicator.
std::unique_ptr<Communicator> mpi_world(const std::string& name, const CommOptions& opts);
// Splits the world: ranks with the same color form a group, ordered by key. Collective.
std::unique_ptr<Communicator> mpi_split(int color, int key, const std::string& name, const CommOptions& opts);
// Plain MPI_Allreduce on the world (the benchmark's peer).
void mpi_native_all_reduce(float* data, int64_t n);

}  // namespace ft

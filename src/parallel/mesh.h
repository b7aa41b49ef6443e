// Mesh: the ranks of a job arranged as pp × dp × cp × tp, tp innermost (it needs the fastest
// links: consecutive ranks share a node), then cp (its ring moves every layer's keys and values,
// so it stays inside a node too when tp · cp ranks fit one), then dp, then pp:
//     world_rank = ((pp_index · dp + dp_index) · cp + cp_index) · tp + tp_index
// The mesh validates the degrees against the world size and hands out one communicator per
// axis, and one over dp × cp: the cp ranks of a replica hold the same weights and see different
// tokens of the same samples, so gradients are reduced (and ZeRO shards the state) over dp × cp,
// cp inside dp (its ranks ordered dp_index · cp + cp_index). With cp = 1 it is the dp group itself.
// It is passed explicitly to whatever needs it; there is no global parallel state.
//
//   Mesh mesh = Mesh::create(cfg.parallel, runtime);   // collective over the world
//   mesh.dp().all_reduce(...);  mesh.coord().tp;       // this rank's place
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "parallel/comm/comm.h"
#include "parallel/parallel_config.h"
#include "tensor/exec_context.h"

namespace ft {

struct MeshCoord {
  int64_t pp = 0, dp = 0, cp = 0, tp = 0;
};

class Mesh {
 public:
  // The single-process mesh (world size 1).
  static Mesh single();
  // Over MPI: splits the world into the four axes. world_size must equal dp · cp · tp · pp.
  static Mesh create_mpi(const ParallelConfig& p, int world_rank, int world_size, const std::string& board_dir);
  // Without a transport (`fluxtrain train --dry-run`: one process stands in for every rank): the
  // same groups, each communicator made by make(axis name, the group's world ranks in axis
  // order, this rank's index among them).
  using CommFactory = std::function<std::shared_ptr<Communicator>(const std::string&, const std::vector<int>&, int)>;
  static Mesh create_with(const ParallelConfig& p, int world_rank, const CommFactory& make);

  // Throws ft::Error listing the degrees when their product is not the world size.
  static void validate(const ParallelConfig& p, int64_t world_size);
  static MeshCoord coord_of(const ParallelConfig& p, int64_t world_rank);

  const ParallelConfig& degrees() const { return p_; }
  const MeshCoord& coord() const { return coord_; }
  int world_rank() const { return world_rank_; }
  int world_size() const { return static_cast<int>(p_.world_size()); }
  Communicator& world() { return *world_; }
  Communicator& dp() { return *dp_; }
  Communicator& tp() { return *tp_; }
  Communicator& pp() { return *pp_; }
  Communicator& cp() { return *cp_; }
  // The gradient group: dp × cp (the dp group when cp = 1).
  Communicator& dp_cp() { return *dp_cp_; }
  std::string describe() const;  // "rank 3 = (pp 0, dp 1, tp 1) of pp1 × dp2 × tp2" (+ cp when > 1)
  // The transport of the groups, once per mesh, as p.comm asks for a rank computing on ctx
  // (device_comm.h decides; throws ft::Error for a combination that cannot work). Collective over
  // the world:
  //   device transport (NCCL): the dp, tp and pp groups (with cp > 1 also cp, with a channel per
  //     ring link as pp, and dp × cp) move device buffers over it, host buffers over MPI; the world
  //     group stays on MPI, staging device buffers through host memory;
  //   MPI on a device rank: every group stages device buffers through host memory
  //     (parallel/comm/host_staged_comm.h);
  //   MPI on the CPU: nothing changes.
  // A second trainer on the same mesh keeps what the first chose.
  void use_comm(const ParallelConfig& p, const ExecContext& ctx);
  // The transport of the dp/tp/pp groups: "MPI", "MPI (device buffers staged through host memory)"
  // or the device backend's name ("NCCL").
  const std::string& transport() const { return transport_; }

 private:
  ParallelConfig p_;
  MeshCoord coord_;
  int world_rank_ = 0;
  std::string board_dir_;  // the job's arrival boards ("" = none)
  std::string transport_ = "MPI";
  bool comm_chosen_ = false;
  std::shared_ptr<Communicator> world_, dp_, tp_, pp_, cp_, dp_cp_;
};

}  // namespace ft

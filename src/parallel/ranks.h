// Ranks: this process's place among the job's ranks. Under mpirun/srun it starts MPI and builds the mesh over
// the world; alone it is the single-rank mesh. --nproc N re-executes the command under mpirun
// on this machine.
//
//   Ranks ranks(cfg.parallel, cfg.train.run_dir);
//   Trainer t(cfg, ranks.mesh());
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "parallel/mesh.h"
#include "parallel/parallel_config.h"

namespace ft {

class MpiRuntime;

class Ranks {
 public:
  Ranks(const ParallelConfig& p, const std::string& run_dir);
  ~Ranks();
  Mesh& mesh() { return *mesh_; }
  bool multi_rank() const { return mpi_ != nullptr; }
  // After an error in a multi-rank job: stop every rank (never leave peers waiting).
  [[noreturn]] void abort(int code);

 private:
  std::unique_ptr<MpiRuntime> mpi_;
  std::unique_ptr<Mesh> mesh_;
};

// Runs `argv` (this binary's own command line minus --nproc) under mpirun with nproc ranks on
// this machine and returns mpirun's exit code.
int exec_under_mpirun(int nproc, const std::vector<std::string>& argv);
// exec_under_mpirun's stop handling, installed as early as possible (idempotent): a SIGTERM, SIGUSR1
// or SIGINT from now on is a stop request for the ranks (fault/stop_file.h), even before they start.
void take_stop_signals_for_mpirun();

}  // namespace ft

// This process's place on its node — its index among the node's ranks and their number — from
// the launcher's environment, read here and nowhere else: the trainer (which GPU a rank drives,
// its metrics port), telemetry's labels and the memory check before a run (once per node).
//
//   int gpu = local_rank_from_env() % device_count;  // mpirun, srun, torchrun-style launchers
//   if (local_rank_from_env() == 0) check_memory_fits(cfg, local_size_from_env(), ...);
#pragma once

namespace ft {

// OMPI_COMM_WORLD_LOCAL_RANK (mpirun), SLURM_LOCALID (srun), LOCAL_RANK, MPI_LOCALRANKID (MPICH),
// the first that is set to a number in [0, 65536); 0 when none is.
int local_rank_from_env();

// OMPI_COMM_WORLD_LOCAL_SIZE (mpirun), SLURM_NTASKS_PER_NODE (srun), LOCAL_WORLD_SIZE,
// MPI_LOCALNRANKS (MPICH), the first that is set to a number in [1, 65536); 1 when none is.
int local_size_from_env();

}  // namespace ft

// GoogleTest main for tests that run under mpirun: every rank runs every test; only rank 0
// prints, and the exit code is non-zero when any rank failed.
#include <gtest/gtest.h>
#include <mpi.h>

#include "parallel/comm/mpi_comm.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ft::MpiRuntime mpi;
  if (mpi.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS() != 0;
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any && mpi.rank() == 0) std::fprintf(stderr, "some rank failed\n");
  return any;
}

// Our ring all-reduce (parallel/comm/mpi_comm.cpp: reduce-scatter + all-gather over MPI point-to-point,
// on the communicator's thread) against a plain MPI_Allreduce of the same buffer, in one run.
//
//   mpirun -np 2 --oversubscribe build/bench/allreduce_bench [MiB...]
//
// Bus bandwidth = bytes · 2 (P − 1) / P / seconds (the NCCL-tests convention: what each link
// carries), best of several repetitions per size. The ratio ours / MPI is printed last.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "parallel/comm/mpi_comm.h"
#include "util/clock.h"

int main(int argc, char** argv) {
  ft::MpiRuntime mpi;
  const int P = mpi.size(), rank = mpi.rank();
  std::vector<double> sizes_mb = {1, 4, 16, 64};
  if (argc > 1) {
    sizes_mb.clear();
    for (int i = 1; i < argc; ++i) sizes_mb.push_back(std::atof(argv[i]));
  }
  auto comm = ft::mpi_world("bench", ft::CommOptions{600, ""});
  if (rank == 0) std::printf("%-8s %14s %14s %14s %8s\n", "MiB", "ours GB/s", "ours bf16", "MPI GB/s", "ratio");
  double last_ratio = 0;
  for (double mb : sizes_mb) {
    const int64_t n = static_cast<int64_t>(mb * 1024 * 1024 / 4);
    std::vector<float> x(static_cast<size_t>(n), 1.0f);
    auto best = [&](auto&& fn) {
      double t = 1e30;
      for (int rep = 0; rep < 5; ++rep) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = ft::now_seconds();
        fn();
        double dt = ft::now_seconds() - t0, worst = 0;
        MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        t = std::min(t, worst);
      }
      return 4.0 * static_cast<double>(n) * 2 * (P - 1) / P / t / 1e9;
    };
    double ours = best([&] { comm->all_reduce(x.data(), n); });
    double ours16 = best([&] { comm->all_reduce(x.data(), n, ft::ReduceOp::kSum, ft::Wire::kBF16); });
    double native = best([&] { ft::mpi_native_all_reduce(x.data(), n); });
    last_ratio = ours / native;
    if (rank == 0) std::printf("%-8.0f %14.2f %14.2f %14.2f %8.2f\n", mb, ours, ours16, native, last_ratio);
  }
  if (rank == 0) std::printf("ratio ours/MPI_Allreduce (fp32, largest size): %.2f\n", last_ratio);
  return 0;
}

#include "util/local_rank.h"

#include <cstdlib>
#include <initializer_list>

namespace ft {
namespace {

// The first of `vars` set to a whole number in [lo, 65536), or `fallback`.
int first_number(std::initializer_list<const char*> vars, long lo, int fallback) {
  for (const char* var : vars) {
    const char* v = std::getenv(var);
    if (v && *v) {
      char* end = nullptr;
      const long r = std::strtol(v, &end, 10);
      if (*end == '\0' && r >= lo && r < 65536) return static_cast<int>(r);
    }
  }
  return fallback;
}

}  // namespace

int local_rank_from_env() {
  return first_number({"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK", "MPI_LOCALRANKID"}, 0, 0);
}

int local_size_from_env() {
  return first_number({"OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE", "LOCAL_WORLD_SIZE", "MPI_LOCALNRANKS"}, 1,
                      1);
}

}  // namespace ft

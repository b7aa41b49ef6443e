#include "dist/job.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "dist/mpi_comm.h"
#include "util/error.h"
#include "util/log.h"

namespace ft {

Job::Job(const ParallelConfig& p, const std::string& run_dir) {
  if (!MpiRuntime::launched_by_mpi()) {
    if (p.world_size() != 1) {
      throw Error(fmt::format("parallel.dp × parallel.tp × parallel.pp = {} × {} × {} = {} ranks, but this process "
                              "was not started by mpirun",
                              p.dp, p.tp, p.pp, p.world_size()),
                  fmt::format("add --nproc {} to start them on this machine, or use mpirun -np {}", p.world_size(),
                              p.world_size()));
    }
    mesh_ = std::make_unique<Mesh>(Mesh::single());
    return;
  }
  mpi_ = std::make_unique<MpiRuntime>();
  set_log_rank(mpi_->rank(), mpi_->size());
  mesh_ = std::make_unique<Mesh>(Mesh::create_mpi(p, mpi_->rank(), mpi_->size(), run_dir + "/.comm"));
  log_info("{} ranks; {}", mpi_->size(), mesh_->describe());
}

Job::~Job() = default;

void Job::abort(int code) {
  if (mpi_) MpiRuntime::abort(code);
  std::exit(code);
}

int exec_under_mpirun(int nproc, const std::vector<std::string>& argv) {
  std::vector<std::string> cmd = {"mpirun", "-np", std::to_string(nproc), "--oversubscribe", "--bind-to", "none"};
  if (::geteuid() == 0) cmd.push_back("--allow-run-as-root");
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  std::vector<char*> args;
  for (auto& s : cmd) args.push_back(s.data());
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execvp("mpirun", args.data());
    std::perror("mpirun");
    std::_Exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
    throw Error("could not start mpirun", "install OpenMPI (scripts/install-deps.sh does)");
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace ft

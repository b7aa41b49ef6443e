#include "parallel/ranks.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "parallel/comm/mpi_comm.h"
#include "util/error.h"
#include "util/log.h"

namespace ft {

Ranks::Ranks(const ParallelConfig& p, const std::string& run_dir) {
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

Ranks::~Ranks() = default;

void Ranks::abort(int code) {
  if (mpi_) MpiRuntime::abort(code);
  std::exit(code);
}

namespace {

// A stop request to `--nproc` becomes SIGUSR1 to mpirun, which forwards it to every rank (mpirun's
// own SIGTERM / SIGINT handling would kill the ranks within a second or two, before any could
// checkpoint). A second SIGINT stops the job at once.
volatile sig_atomic_t g_mpirun = 0;
volatile sig_atomic_t g_forwarded = 0;
void forward_stop(int sig) {
  if (g_mpirun <= 0) return;
  if (sig == SIGINT && g_forwarded) {
    ::kill(static_cast<pid_t>(g_mpirun), SIGTERM);  // mpirun tears the job down
    return;
  }
  g_forwarded = 1;
  ::kill(static_cast<pid_t>(g_mpirun), SIGUSR1);
}

}  // namespace

int exec_under_mpirun(int nproc, const std::vector<std::string>& argv) {
  // --stdin none: mpirun runs in its own process group (below), where reading the terminal would
  // stop it.
  std::vector<std::string> cmd = {"mpirun",  "-np", std::to_string(nproc), "--oversubscribe", "--bind-to", "none",
                                  "--stdin", "none"};
  if (::geteuid() == 0) cmd.push_back("--allow-run-as-root");
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  std::vector<char*> args;
  for (auto& s : cmd) args.push_back(s.data());
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    // Its own process group: Ctrl-C reaches only us, and we turn it into a graceful stop. It dies
    // with us.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) std::_Exit(1);
    ::execvp("mpirun", args.data());
    std::perror("mpirun");
    std::_Exit(127);
  }
  g_mpirun = pid;
  struct sigaction sa {};
  sa.sa_handler = forward_stop;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGUSR1, SIGINT}) ::sigaction(sig, &sa, nullptr);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_mpirun = 0;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
    throw Error("could not start mpirun", "install OpenMPI (scripts/install-deps.sh does)");
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace ft

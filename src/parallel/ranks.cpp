#include "parallel/ranks.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "fault/stop_file.h"
#include "parallel/comm/mpi_comm.h"
#include "util/error.h"
#include "util/log.h"

namespace ft {

Ranks::Ranks(const ParallelConfig& p, const std::string& run_dir) {
  if (!MpiRuntime::launched_by_mpi()) {
    if (p.world_size() != 1) {
      throw Error(fmt::format("{} ranks, but this process was not started by mpirun", p.degrees_product()),
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
// checkpoint). A rank that has not installed its handlers yet would lose that SIGUSR1 (or die of
// it), so the handler creates the stop file first (fault/stop_file.h), which every rank checks at
// its step boundaries, and SIGUSR1 goes to mpirun only once every rank is ready. A second SIGINT
// stops the job at once.
volatile sig_atomic_t g_mpirun = 0;
volatile sig_atomic_t g_stop_asked = 0;
char g_stop_file[4096];
void forward_stop(int sig) {
  if (sig == SIGINT && g_stop_asked) {
    if (g_mpirun > 0)
      ::kill(static_cast<pid_t>(g_mpirun), SIGTERM);  // mpirun tears the job down
    else
      ::_exit(130);
    return;
  }
  if (!g_stop_asked) {
    const int fd = ::open(g_stop_file, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);  // async-signal-safe
    if (fd >= 0) ::close(fd);
  }
  g_stop_asked = 1;
}

std::string g_stop_dir;  // set once, with g_stop_file

void remove_stop_dir() {
  std::error_code ec;
  std::filesystem::remove_all(g_stop_dir, ec);
}

}  // namespace

void take_stop_signals_for_mpirun() {
  if (!g_stop_dir.empty()) return;
  // The stop file's directory, this job's alone: the ranks' ready markers are counted in it.
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("fluxtrain-stop-{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  g_stop_dir = dir.string();
  std::atexit(remove_stop_dir);  // also when the command fails before mpirun starts
  const std::string stop_file = (dir / "stop").string();
  std::snprintf(g_stop_file, sizeof g_stop_file, "%s", stop_file.c_str());
  ::setenv(kStopFileEnv, stop_file.c_str(), 1);  // the ranks inherit it (mpirun passes it on locally)
  struct sigaction sa {};
  sa.sa_handler = forward_stop;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGUSR1, SIGINT}) ::sigaction(sig, &sa, nullptr);
}

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
  take_stop_signals_for_mpirun();
  const std::string stop_file = g_stop_file;
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
  int status = 0;
  bool forwarded = false;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) break;
    if (g_stop_asked && !forwarded && count_ready_ranks(stop_file) >= nproc) {
      forwarded = true;
      ::kill(pid, SIGUSR1);
    }
    ::usleep(20000);
  }
  g_mpirun = 0;
  remove_stop_dir();
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
    throw Error("could not start mpirun", "install OpenMPI (scripts/install-deps.sh does)");
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace ft

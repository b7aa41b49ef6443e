#include "launch/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "util/error.h"

extern char** environ;

namespace ft {

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                           const std::string& log_path, bool echo) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw Error(fmt::format("pipe: {}", std::strerror(errno)));
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  for (const std::string& kv : extra_env) {
    std::string key = kv.substr(0, kv.find('=') + 1);
    std::erase_if(env, [&](const std::string& e) { return e.rfind(key, 0) == 0; });
    env.push_back(kv);
  }
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  int err_pipe[2];  // reports a failed exec to the parent
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) throw Error(fmt::format("pipe: {}", std::strerror(errno)));
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) throw Error(fmt::format("fork: {}", std::strerror(errno)));
  if (pid_ == 0) {
    ::setpgid(0, 0);
    // The launcher dies with the supervisor (killed outright, its host lost): no job goes on
    // without its supervisor, writing into the run directory that a restarted one resumes. mpirun's
    // daemons on the other hosts lose their lifeline and end their ranks.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::execvpe(args[0], args.data(), envp.data());
    int e = errno;
    (void)!::write(err_pipe[1], &e, sizeof e);
    ::_exit(127);
  }
  ::setpgid(pid_, pid_);
  ::close(fds[1]);
  ::close(err_pipe[1]);
  int exec_errno = 0;
  ssize_t n = ::read(err_pipe[0], &exec_errno, sizeof exec_errno);
  ::close(err_pipe[0]);
  if (n == sizeof exec_errno) {
    ::close(fds[0]);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    throw Error(fmt::format("cannot start {}: {}", argv[0], std::strerror(exec_errno)),
                argv[0] == "srun" ? "is Slurm installed on this node?" : "install OpenMPI (scripts/install-deps.sh)");
  }
  reader_ = std::thread([this, fd = fds[0], log_path, echo] { read_loop(fd, log_path, echo); });
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !poll()) {
    signal_group(SIGKILL);
    wait_for(5);
  }
  stop_reading_ = true;
  if (reader_.joinable()) reader_.join();
}

void ChildProcess::read_loop(int fd, std::string log_path, bool echo) {
  std::FILE* log = std::fopen(log_path.c_str(), "a");
  std::string partial;
  char buf[4096];
  while (true) {
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, 200);
    if (ready == 0) {
      if (stop_reading_) break;
      continue;
    }
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (log) {
      std::fwrite(buf, 1, static_cast<size_t>(n), log);
      std::fflush(log);
    }
    if (echo) (void)!::write(2, buf, static_cast<size_t>(n));
    partial.append(buf, static_cast<size_t>(n));
    size_t nl;
    std::lock_guard<std::mutex> lock(mu_);
    while ((nl = partial.find('\n')) != std::string::npos) {
      lines_.push_back(partial.substr(0, nl));
      partial.erase(0, nl + 1);
      if (lines_.size() > 400) lines_.pop_front();
    }
  }
  if (!partial.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.push_back(partial);
  }
  if (log) std::fclose(log);
  ::close(fd);
}

std::optional<int> ChildProcess::poll() {
  if (code_ || pid_ <= 0) return code_;
  int st = 0;
  pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_) code_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return code_;
}

int ChildProcess::wait_for(double seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (true) {
    if (auto c = poll()) return *c;
    if (std::chrono::steady_clock::now() > deadline) return -1;
    ::usleep(20000);
  }
}

void ChildProcess::signal_group(int sig) {
  if (pid_ > 0 && !code_) ::kill(-pid_, sig);
}

std::vector<std::string> ChildProcess::recent_lines() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {lines_.begin(), lines_.end()};
}

char process_state(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string s;
  if (!in || !std::getline(in, s)) return 0;
  auto p = s.rfind(')');
  if (p == std::string::npos || p + 2 >= s.size()) return 0;
  return s[p + 2];
}

}  // namespace ft

#include "train/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "util/error.h"
#include "util/log.h"

namespace ft {
namespace {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

std::string read_fd(int fd) {
  std::string text;
  char buf[256];
  ::lseek(fd, 0, SEEK_SET);
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

int held_fd = -1;

// A run that ends normally empties its lock file: only a process that died holding it leaves a
// holder line behind, which the next start then reports as stale.
void clear_holder() {
  if (held_fd < 0) return;
  [[maybe_unused]] const int rc = ::ftruncate(held_fd, 0);
}

}  // namespace

std::string lock_run_dir(const std::string& dir) {
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + kRunLockFile;
  // Never closed: the lock lasts as long as this process (and no child inherits it).
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    throw Error(fmt::format("run directory {}: cannot open {}: {}", dir, path, std::strerror(errno)),
                "choose another --run-dir");
  const std::string previous = read_fd(fd);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const std::string holder = read_fd(fd);  // written by now (the holder writes right after its flock)
    ::close(fd);
    const char* ours = std::getenv(kRunLockHolderEnv);
    if (ours && holder == ours) return holder;  // our supervisor holds it for this job
    // This process holds it already (a second claim of the same directory: flock locks belong to
    // the open file, so the new descriptor conflicts with our own).
    if (holder == fmt::format("{} {}", host_name(), ::getpid())) return holder;
    std::string host = "?", pid = "?";
    std::istringstream(holder) >> host >> pid;
    throw Error(
        fmt::format("run directory {} is in use by another run (host {}, pid {}; {})", dir, host, pid, path),
        fmt::format("wait for it to end or stop it (kill -TERM {} on {}), or choose another --run-dir", pid, host));
  }
  if (!previous.empty())  // free, yet a holder line: that process died holding it (a crash, kill -9)
    log_info(
        "run directory {}: the lock of an earlier run (host and pid {}) is stale: that process ended without "
        "releasing it; taking it over",
        dir, previous);
  const std::string holder = fmt::format("{} {}", host_name(), ::getpid());
  if (held_fd < 0) std::atexit(clear_holder);
  held_fd = fd;
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, (holder + "\n").data(), holder.size() + 1, 0) < 0)
    log_warn("run directory {}: cannot write the lock's holder into {}: {}", dir, path, std::strerror(errno));
  return holder;
}

}  // namespace ft

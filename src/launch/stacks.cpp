#include "launch/stacks.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <thread>

#include "util/fs.h"
#include "util/shell_quote.h"

namespace ft {
namespace {

int count_threads(const std::string& text) {
  int n = 0;
  for (size_t at = text.find("\nThread "); at != std::string::npos; at = text.find("\nThread ", at + 1)) ++n;
  if (text.rfind("Thread ", 0) == 0) ++n;
  return n;
}

}  // namespace

std::string stack_command(int64_t pid, double timeout_s) {
  return fmt::format(
      "timeout -s KILL {:.0f} gdb -p {} -batch -nx -q -ex 'set pagination off' -ex 'set print thread-events off' "
      "-ex 'thread apply all bt' 2>&1",
      timeout_s, pid);
}

std::vector<std::string> dump_stacks(const std::vector<RankProcess>& ranks, const std::string& dir, double timeout_s) {
  std::filesystem::create_directories(dir);
  std::vector<std::string> lines(ranks.size());
  std::vector<std::thread> workers;
  for (size_t i = 0; i < ranks.size(); ++i) {
    workers.emplace_back([&, i] {
      const RankProcess& r = ranks[i];
      std::string cmd = stack_command(r.pid, timeout_s);
      if (!r.local)
        cmd = fmt::format("ssh -o BatchMode=yes -o ConnectTimeout=5 {} {}", shell_quote(r.host), shell_quote(cmd));
      std::string out;
      int code = 127;
      if (std::FILE* p = ::popen(cmd.c_str(), "r")) {
        char buf[4096];
        size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
        int st = ::pclose(p);
        code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      const std::string path = fmt::format("{}/rank-{:05d}.txt", dir, r.rank);
      const std::string head = fmt::format("# rank {} on {} (pid {}): {}\n", r.rank, r.host, r.pid, cmd);
      try {
        write_file_atomic(path, head + out);
      } catch (const std::exception& e) {
        lines[i] = fmt::format("rank {} on {}: cannot write {}: {}", r.rank, r.host, path, e.what());
        return;
      }
      const int threads = count_threads(out);
      if (threads > 0)
        lines[i] = fmt::format("rank {} on {} (pid {}): {} thread(s) -> {}", r.rank, r.host, r.pid, threads, path);
      else
        lines[i] = fmt::format("rank {} on {} (pid {}): no stack read (exit {}{}): see {}", r.rank, r.host, r.pid, code,
                               code == 127 ? ", is gdb installed?" : "", path);
    });
  }
  for (auto& w : workers) w.join();
  return lines;
}

}  // namespace ft

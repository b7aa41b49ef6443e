// ChildProcess: a launcher (mpirun / srun) started by the supervisor in its own process group,
// with stdout and stderr captured line by line into a log file (and echoed to our stderr); the
// most recent lines are kept for finding out what went wrong. It dies with the supervisor
// (PR_SET_PDEATHSIG, SIGKILL): a supervisor killed outright leaves no job running on its own.
//
//   ChildProcess p({"mpirun", "-np", "4", ...}, {"FLUXTRAIN_ATTEMPT=1"}, "run/logs/attempt-1.log");
//   while (!p.poll()) sleep...;   // exit code: 0..255, or 128 + signal
//   p.signal_group(SIGTERM);
#pragma once

#include <sys/types.h>

#include <atomic>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace ft {

class ChildProcess {
 public:
  // Throws ft::Error when the program cannot be started (naming it).
  ChildProcess(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
               const std::string& log_path, bool echo);
  ~ChildProcess();  // kills the group if still running, joins the reader
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  std::optional<int> poll();     // exit code once exited (non-blocking)
  int wait_for(double seconds);  // -1 when still running after `seconds`
  void signal_group(int sig);
  std::vector<std::string> recent_lines() const;  // up to the last 400 lines of output

 private:
  void read_loop(int fd, std::string log_path, bool echo);
  pid_t pid_ = -1;
  std::optional<int> code_;
  std::thread reader_;
  std::atomic<bool> stop_reading_{false};  // set once the launcher is gone (orphans may hold the pipe)
  mutable std::mutex mu_;
  std::deque<std::string> lines_;
};

// Whether a local process exists and is not a zombie; its state letter from /proc ('R', 'S',
// 'T' stopped, 'Z' zombie, ...), or 0 when it is gone.
char process_state(pid_t pid);

}  // namespace ft

#include "train/stop_request.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <mutex>
#include <thread>

#include "ckpt/checkpointer.h"  // process_age_seconds
#include "fault/exit_codes.h"
#include "fault/stop_file.h"
#include "parallel/comm/comm.h"
#include "util/clock.h"
#include "util/log.h"

namespace ft {
namespace {

// The signals are never delivered asynchronously: every thread blocks them (the mask is set
// before any other thread starts, and threads inherit it), and one thread takes them with
// sigwait. An asynchronous handler would run on whatever thread the kernel picks — and oneDNN's
// JIT GEMM kernels point the stack pointer into a heap workspace (oneDNN issue #4845, fixed
// upstream by PR #4855; Debian ships 2.6.3), where the kernel's signal frame would then corrupt the heap.
std::atomic<int> g_signal{0};  // the first stop signal
std::atomic<bool> g_done{false};
std::atomic<int64_t> g_grace_ms{60000};
std::once_flag g_once;

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGINT:
      return "SIGINT";
    default:
      return "a signal";
  }
}

void say(const char* s) {
  ssize_t r = ::write(STDERR_FILENO, s, std::strlen(s));
  (void)r;
}

void signal_thread(sigset_t set) {
  int sigints = 0;
  double deadline = 0;  // Unix seconds by which the stop's checkpoint must be durable (0: no stop yet)
  for (;;) {
    int sig = -1;
    if (deadline > 0 && !g_done.load()) {
      const double left = std::max(0.0, deadline - now_seconds());
      timespec t{static_cast<time_t>(left), static_cast<long>((left - std::floor(left)) * 1e9)};
      sig = ::sigtimedwait(&set, nullptr, &t);
      if (sig < 0 && errno == EAGAIN && !g_done.load()) {
        log_error(
            "{} was received {:.0f} s ago (fault.preempt_grace_s) and the checkpoint of the stop is not durable "
            "yet: exiting without it (code {}); a resume starts from the newest committed checkpoint",
            signal_name(g_signal.load()), static_cast<double>(g_grace_ms.load()) / 1000, kExitStoppedUnsaved);
        ::_exit(kExitStoppedUnsaved);
      }
    } else {
      sig = ::sigwaitinfo(&set, nullptr);
    }
    if (sig < 0) continue;  // EINTR, or the timeout after the stop completed
    if (sig == SIGINT && ++sigints >= 2) {
      say("\nfluxtrain: second SIGINT: exiting at once, without a checkpoint of the step in flight\n");
      ::_exit(kExitInterrupted);
    }
    int none = 0;
    if (!g_signal.compare_exchange_strong(none, sig)) continue;  // already stopping
    deadline = now_seconds() + static_cast<double>(g_grace_ms.load()) / 1000;
    say("\nfluxtrain: ");
    say(signal_name(sig));
    say(" received: finishing the step in flight, then checkpointing and exiting (code 4)");
    say(sig == SIGINT ? "; Ctrl-C again exits at once\n" : "\n");
  }
}

}  // namespace

void StopRequest::install() {
  std::call_once(g_once, [] {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGTERM, SIGUSR1, SIGINT}) sigaddset(&set, sig);
    ::pthread_sigmask(SIG_BLOCK, &set, nullptr);  // this thread, and every thread started from now on
    std::thread(signal_thread, set).detach();
    // Under a launcher: from now on a SIGUSR1 reaches this rank (fault/stop_file.h).
    if (const char* f = std::getenv(kStopFileEnv); f && *f) std::ofstream(ready_marker(f, ::getpid()));
  });
}

namespace {

// A launcher's stop file (fault/stop_file.h), once seen, becomes the SIGUSR1 it stands for: the
// signal thread takes it as any other (the grace starts, the message is the same).
void take_stop_file() {
  static bool taken = false;
  const char* f = std::getenv(kStopFileEnv);
  if (taken || g_signal.load() != 0 || !f || !*f || ::access(f, F_OK) != 0) return;
  taken = true;
  ::kill(::getpid(), SIGUSR1);
  for (int i = 0; i < 2000 && g_signal.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

}  // namespace

void StopRequest::set_grace(double seconds) {
  g_grace_ms = static_cast<int64_t>(seconds * 1000);
}

void StopRequest::done() {
  g_done = true;
}

int StopRequest::signal_received() {
  return g_signal.load();
}

std::optional<std::string> StopRequest::agreed(Communicator& world) {
  take_stop_file();
  double flags[2] = {static_cast<double>(g_signal.load()),
                     budget_s_ > 0 && process_age_seconds() >= budget_s_ ? 1.0 : 0.0};
  if (world.size() > 1) world.all_reduce(flags, 2, ReduceOp::kMax);
  if (flags[0] > 0) return std::string(signal_name(static_cast<int>(flags[0])));
  if (flags[1] > 0) return fmt::format("train.stop_after_minutes = {}", budget_s_ / 60);
  return std::nullopt;
}

}  // namespace ft

#include "train/stop_request.h"

#include <semaphore.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <mutex>
#include <thread>

#include "ckpt/checkpointer.h"  // process_age_seconds
#include "dist/comm.h"
#include "fault/exit_codes.h"
#include "util/log.h"

namespace ft {
namespace {

std::atomic<int> g_signal{0};   // the first stop signal
std::atomic<int> g_sigints{0};  // SIGINTs so far
std::atomic<int64_t> g_grace_ms{60000};
sem_t g_wake;  // posted by the first signal: the watchdog starts counting
sem_t g_done;  // posted by done(): the watchdog stands down
std::once_flag g_once;

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case SIGINT: return "SIGINT";
    default: return "a signal";
  }
}

void say(const char* s) {  // async-signal-safe
  ssize_t r = ::write(STDERR_FILENO, s, std::strlen(s));
  (void)r;
}

void on_signal(int sig) {
  if (sig == SIGINT && g_sigints.fetch_add(1) >= 1) {
    say("\nfluxtrain: second SIGINT: exiting at once, without a checkpoint of the step in flight\n");
    ::_exit(kExitInterrupted);
  }
  int none = 0;
  if (!g_signal.compare_exchange_strong(none, sig)) return;  // already stopping
  say("\nfluxtrain: ");
  say(signal_name(sig));
  say(" received: finishing the step in flight, then checkpointing and exiting (code 4)");
  say(sig == SIGINT ? "; Ctrl-C again exits at once\n" : "\n");
  ::sem_post(&g_wake);
}

void watchdog() {
  while (::sem_wait(&g_wake) != 0 && errno == EINTR) {
  }
  const int64_t grace_ms = g_grace_ms.load();
  timespec deadline{};
  ::clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += static_cast<time_t>(grace_ms / 1000);
  deadline.tv_nsec += static_cast<long>(grace_ms % 1000) * 1000000L;
  if (deadline.tv_nsec >= 1000000000L) deadline.tv_sec += 1, deadline.tv_nsec -= 1000000000L;
  while (::sem_timedwait(&g_done, &deadline) != 0) {
    if (errno == EINTR) continue;
    log_error("{} was received {:.0f} s ago (fault.preempt_grace_s) and the checkpoint of the stop is not durable yet: "
              "exiting without it (code {}); a resume starts from the newest committed checkpoint",
              signal_name(g_signal.load()), static_cast<double>(grace_ms) / 1000, kExitStoppedUnsaved);
    ::_exit(kExitStoppedUnsaved);
  }
}

}  // namespace

void StopRequest::install() {
  std::call_once(g_once, [] {
    ::sem_init(&g_wake, 0, 0);
    ::sem_init(&g_done, 0, 0);
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (int sig : {SIGTERM, SIGUSR1, SIGINT}) ::sigaction(sig, &sa, nullptr);
    std::thread(watchdog).detach();
  });
}

void StopRequest::set_grace(double seconds) {
  g_grace_ms = static_cast<int64_t>(seconds * 1000);
}

void StopRequest::done() {
  ::sem_post(&g_done);
}

int StopRequest::signal_received() {
  return g_signal.load();
}

std::optional<std::string> StopRequest::agreed(Communicator& world) {
  double flags[2] = {static_cast<double>(g_signal.load()),
                     budget_s_ > 0 && process_age_seconds() >= budget_s_ ? 1.0 : 0.0};
  if (world.size() > 1) world.all_reduce(flags, 2, ReduceOp::kMax);
  if (flags[0] > 0) return std::string(signal_name(static_cast<int>(flags[0])));
  if (flags[1] > 0) return fmt::format("train.stop_after_minutes = {}", budget_s_ / 60);
  return std::nullopt;
}

}  // namespace ft

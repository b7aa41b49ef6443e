// StopRequest: stopping a run on purpose. A signal — SIGTERM (Kubernetes eviction, Slurm's
// --signal, the supervisor), SIGUSR1 (what mpirun and srun forward), the first SIGINT (Ctrl-C) —
// or a time budget (train.stop_after_minutes) asks for a stop; at the next step boundary every
// rank learns that some rank asked (one all-reduce over the world: only one rank may have been
// signalled), so all stop after the same step, checkpoint it and exit with kExitStopped (4).
// A second SIGINT exits at once (130). If the checkpoint is not durable fault.preempt_grace_s
// after the first signal, the process exits without it (kExitStoppedUnsaved, 5).
//
// The signals are blocked in every thread and taken by one thread with sigwait — never handled
// asynchronously on a computing thread (oneDNN's JIT GEMMs run with the stack pointer in the heap,
// where a signal frame would corrupt it) — so install() must run before any other thread starts.
//
//   StopRequest::install();                       // train ranks, first thing: the handlers
//   StopRequest::set_grace(cfg.fault.preempt_grace_s);
//   StopRequest stop(cfg.train.stop_after_minutes);
//   while (step < steps) {
//     if (auto why = stop.agreed(world)) { ...checkpoint...; StopRequest::done(); return kStopped; }
//     step();
//   }
#pragma once

#include <optional>
#include <string>

namespace ft {

class Communicator;

class StopRequest {
 public:
  // Blocks SIGTERM, SIGUSR1 and SIGINT in this thread (and so in every thread it starts later)
  // and starts the thread that takes them and keeps the grace (idempotent).
  static void install();
  static void set_grace(double seconds);
  // The checkpoint of the stop is durable (or the process is about to exit anyway): the
  // watchdog stands down.
  static void done();
  // The signal received (0: none) — for tests and messages.
  static int signal_received();

  explicit StopRequest(double budget_minutes) : budget_s_(budget_minutes * 60) {}
  // Collective over `world` (every rank calls it at the same step boundary): why the run stops
  // here — "SIGTERM", "train.stop_after_minutes = 30" — or nullopt to go on.
  std::optional<std::string> agreed(Communicator& world);

 private:
  double budget_s_;
};

}  // namespace ft

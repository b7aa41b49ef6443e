// StreamTimer: how long a context's stream spent inside intervals of its own work, measured where
// the work runs — the backend's timing marks (CUDA events) on a device, the host clock where work
// runs in call order (the CPU; a runtime without marks). The data-parallel engines time how long
// the compute stream stalls on communication, without the host waiting for it:
//
//   StreamTimer stall(ctx);
//   stall.begin();  work->stream_wait(ctx);  stall.end();   // on a GPU the host does not wait
//   ...                                                     // later: a read-back synchronizes ctx
//   double s = stall.seconds();   // the intervals since restart(), summed
//   stall.restart();              // the next step's
#pragma once

#include <vector>

#include "tensor/exec_context.h"

namespace ft {

struct DeviceRuntime;

class StreamTimer {
 public:
  explicit StreamTimer(const ExecContext& ctx);
  ~StreamTimer();
  StreamTimer(const StreamTimer&) = delete;
  StreamTimer& operator=(const StreamTimer&) = delete;

  // An interval of the stream's work: from what is queued on it before begin() to what is queued
  // before end(). Intervals do not nest.
  void begin();
  void end();
  // Seconds of the intervals since restart() that the stream has finished (after a synchronize of
  // the context: all of them).
  double seconds() const;
  // Forgets the intervals (their marks are reused).
  void restart();

 private:
  void* mark();
  ExecContext ctx_;
  const DeviceRuntime* rt_;   // the runtime whose marks time the stream; null: host clock readings
  std::vector<double> host_;  // begin, end, begin, ... (host clock)
  std::vector<void*> marks_;  // begin, end, ... (rt_'s marks, kept for reuse)
  size_t used_ = 0;           // marks_ recorded since restart()
};

}  // namespace ft

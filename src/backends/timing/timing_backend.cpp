#include "backends/timing/timing_backend.h"

#include <omp.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <utility>

#include "backends/trace/op_costs.h"
#include "kernels/ops.h"
#include "tensor/backend.h"

namespace ft::timing {
namespace {

std::atomic<bool> g_timing{false};
std::mutex g_mu;
std::vector<plan::OpRecord>& records() {
  static auto* r = new std::vector<plan::OpRecord>;  // never destroyed: ops may run at exit
  return *r;
}

void record(plan::OpRecord r, double seconds) {
  r.seconds = seconds;
  std::lock_guard<std::mutex> lock(g_mu);
  records().push_back(std::move(r));
}

// What the cost function cannot know, read from the call's host arguments: the block attention's
// visible (query, key) pairs (its positions are host memory here). Other ops: nothing.
template <class... Args>
void refine(plan::OpRecord&, const Args&...) {}
// (In: float, or uint16_t for the _bf16 ops; dkv is written in In.)
template <class In>
void refine(plan::OpRecord& r, float*, float*, const In*, const In*, const int32_t* pos_q, const int32_t* pos_k,
            int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t, int64_t D, bool) {
  trace::cost::set_block_pairs(r, trace::cost::block_pairs(pos_q, pos_k, Tq, Tk), B, H, D);
}
template <class In>
void refine(plan::OpRecord& r, float*, In*, const In*, const In*, const In*, const In*, const float*,
            const int32_t* pos_q, const int32_t* pos_k, int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t,
            int64_t D) {
  trace::cost::set_block_pairs(r, trace::cost::block_pairs(pos_q, pos_k, Tq, Tk), B, H, D);
}

// The time an op call took. At 1 thread: the least of the wall clock and the process's CPU time
// over the call — the time it computed (stalls on the caches and memory bandwidth it shares with
// other processes included), not the time it waited for a core while other processes ran (a
// profile taken on a busy machine); the wall clock bounds it where a library's own threads
// worked beside the caller. Above 1 thread: the wall clock (t threads' CPU time is not the op's).
class OpClock {
 public:
  OpClock() : single_(omp_get_max_threads() == 1), wall_(std::chrono::steady_clock::now()) {
    if (single_) cpu_ = process_cpu_seconds();
  }
  double seconds() const {
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_).count();
    return single_ ? std::min(wall, process_cpu_seconds() - cpu_) : wall;
  }

 private:
  static double process_cpu_seconds() {
    timespec ts{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  }
  bool single_;
  std::chrono::steady_clock::time_point wall_;
  double cpu_ = 0;
};

// Each op: the CPU's, timed (CPU ops are synchronous: they return when their result is written).
#define FT_OP(name, params, args)                                                                        \
  void name(const ExecContext& ctx, FT_OP_UNPAREN params) {                                              \
    if (!g_timing.load(std::memory_order_relaxed)) return cpu::op_table().name(ctx, FT_OP_UNPAREN args); \
    plan::OpRecord timed_record_ = trace::cost::name(FT_OP_UNPAREN args);                                \
    refine(timed_record_, FT_OP_UNPAREN args);                                                           \
    const OpClock timed_clock_;                                                                          \
    cpu::op_table().name(ctx, FT_OP_UNPAREN args);                                                       \
    record(std::move(timed_record_), timed_clock_.seconds());                                            \
  }
#include "kernels/op_decls.inc"
#undef FT_OP

constexpr OpTable make_table() {
  OpTable t;
  t.backend = "cpu-timed";
#define FT_OP(name, params, args) t.name = &name;
#include "kernels/op_decls.inc"
#undef FT_OP
  return t;
}
constinit const OpTable kTable = make_table();

}  // namespace

StepClock::StepClock() : single_(omp_get_max_threads() == 1) {
  wall_ = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  cpu_ = static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double StepClock::seconds() const {
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count() - wall_;
  if (!single_) return wall;
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return std::min(wall, static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec) - cpu_);
}

void register_timed_cpu() {
  static const bool once = [] {
    Backend b = cpu_backend();
    b.ops = &kTable;
    register_backend(b);
    return true;
  }();
  (void)once;
}

void start_timing() {
  std::lock_guard<std::mutex> lock(g_mu);
  records().clear();
  g_timing.store(true);
}

std::vector<plan::OpRecord> stop_timing() {
  g_timing.store(false);
  std::lock_guard<std::mutex> lock(g_mu);
  return std::exchange(records(), {});
}

}  // namespace ft::timing

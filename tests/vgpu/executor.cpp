// The SIMT executor (vgpu/cuda_sim.h): a launch runs its blocks one after another on the calling
// thread; the threads of a block are fibers (vgpu/fiber.h, 64 KiB stacks reused), resumed in a seeded
// random order, switching only at __syncthreads and the warp operations. Kernel TUs are compiled
// with -fsanitize=thread and no TSan runtime: the __tsan_* hooks at the end of this file see every
// load and store they make and check them (shared memory: races, poison; the rest: the fiber's own
// stack, the binary's static data, or a registered device allocation). This file is not
// instrumented, so the executor's own state is invisible to the checks.
#include <cublasLt.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cub/device/device_radix_sort.cuh>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "vgpu/cuda_sim.h"
#include "vgpu/faults.h"
#include "vgpu/fiber.h"

extern "C" char __executable_start;
extern "C" char _end;

namespace vgpu {
namespace {

constexpr size_t kStackBytes = 64 << 10;
constexpr int kMaxThreads = 1024;
constexpr size_t kDefaultSmem = 48 << 10, kOptInSmem = 227 << 10;  // sm_90

enum class St : uint8_t { kReady, kBarrier, kWarp, kDone };

struct Fiber {
  FiberContext ctx;
  uintptr_t stack = 0;  // its kStackBytes
  int tid = 0;
  uint3 idx{};
  St st = St::kReady;
  const char* bar_file = nullptr;
  int bar_line = 0;
  WarpOp op = kSyncWarp;
  unsigned mask = 0;
  uint64_t value = 0, result = 0;
  int arg = 0, width = 32;
};

// Per 4-byte word of shared memory: the last writer and reader with the block's barrier epoch and
// their warp's __syncwarp epoch at the time.
struct Shadow {
  int32_t wtid = -1, rtid = -1;
  uint32_t wepoch = 0, wwarp = 0, repoch = 0, rwarp = 0;
  bool many_readers = false;
};

// An allocation [lo, hi) the running launch has accessed, the kinds of access already checked
// there (bounds), and per kind the bytes touched so far [min, max) (for the access hook when the
// launch ends: the race check of runtime_sim.cpp is per byte range).
struct Touched {
  uintptr_t min = UINTPTR_MAX, max = 0;
  void add(uintptr_t a, size_t n) {
    min = a < min ? a : min;
    max = a + n > max ? a + n : max;
  }
};
struct Checked {
  uintptr_t lo = 0, hi = 0;
  bool read = false, write = false;
  Touched r, w;
};
constexpr int kChecked = 8;  // a kernel touches a handful of buffers

// Per warp, kept beside the fibers' states so that a warp operation's arrival costs no scan of
// the lanes: the lanes waiting at a warp operation, their mask while they all share one (`mixed`
// otherwise), and the lanes that exited.
struct WarpLanes {
  unsigned arrived = 0, mask = 0, exited = 0;
  bool mixed = false;
};

struct State {
  // the launch
  const char* kernel = "";
  const char* file = "";
  int line = 0;
  dim3 grid, block;
  size_t dyn_smem = 0;
  uint64_t seed = 0;
  std::mt19937_64 rng;
  // the block
  uint3 bidx{};
  int nthreads = 0;
  std::vector<Fiber> fibers;
  char* stacks = nullptr;
  FiberContext sched;
  Fiber* cur = nullptr;
  std::vector<char> smem;                // dynamic, then the static arrays; kept (and grown) across launches
  size_t smem_limit = 0;                 // this launch's: its dynamic shared memory + 48 KiB of static arrays
  size_t smem_used = 0, smem_dirty = 0;  // beyond smem_dirty: poisoned, shadow fresh
  std::vector<std::pair<const void*, size_t>> statics;  // tag -> offset
  std::vector<Shadow> shadow;
  uint32_t epoch = 0;
  std::vector<uint32_t> warp_epoch;
  std::vector<WarpLanes> warps;
  int at_barrier = 0, done = 0;
  std::vector<Fiber*> ready;
  std::string error;
  // the process
  std::map<uintptr_t, std::pair<size_t, std::string>> memory;  // device allocations
  Checked checked[kChecked];                                   // of the running launch; emptied when `memory` changes
  int nchecked = 0, next_checked = 0;
  int last_hit = 0;                         // the entry of `checked` the last access hit (tried first)
  std::vector<Checked> evicted;             // of the running launch: entries `checked` had no room left for
  std::map<const void*, int> max_dyn_smem;  // cudaFuncSetAttribute
  uint64_t launches = 0;
  std::map<std::string, int> faults;
};

[[gnu::always_inline]] inline State& S() {
  // Leaked, as the runtime's (runtime_sim.cpp): a stream worker may still run a queued kernel or
  // fill while static destructors run at exit (a process may exit with work queued, as on a GPU).
  static State* s = new State;
  return *s;
}

std::string dim_str(uint3 d) {
  std::ostringstream o;
  o << "(" << d.x << "," << d.y << "," << d.z << ")";
  return o.str();
}

std::string where() {
  State& s = S();
  std::ostringstream o;
  o << "kernel " << s.kernel << " (launched at " << s.file << ":" << s.line << ", grid "
    << dim_str({s.grid.x, s.grid.y, s.grid.z}) << ", block " << dim_str({s.block.x, s.block.y, s.block.z})
    << "), block " << dim_str(s.bidx);
  return o.str();
}

std::string thread_str(int tid) {
  const dim3& b = S().block;
  const unsigned x = tid % b.x, y = (tid / b.x) % b.y, z = tid / (b.x * b.y);
  std::ostringstream o;
  o << "thread " << dim_str({x, y, z}) << " (warp " << tid / 32 << " lane " << tid % 32 << ")";
  return o.str();
}

// Records the first error of the block and returns to the scheduler, which throws it; the fiber
// is abandoned (kernels hold no resources).
[[noreturn]] void fail(const std::string& what) {
  State& s = S();
  if (s.error.empty()) s.error = what + " in " + where();
  Fiber* f = s.cur;
  s.cur = nullptr;
  fiber_switch(&f->ctx, &s.sched);
  std::abort();  // never resumed
}

// The next fiber to run, drawn at random from the ready ones; null when none is ready or the block
// has failed (then the scheduler, run_block, decides).
Fiber* pick() {
  State& s = S();
  if (!s.error.empty() || s.ready.empty()) return nullptr;
  // Lemire's multiply-shift maps the 64 random bits onto [0, n) without a 64-bit divide: `rng() % n`
  // made the pick ~7% of a golden run's profile (a draw 20 ns, now 4). A seed's order is not the
  // one the modulo drew, but as reproducible and as uniform (bias below n / 2^64).
  const size_t i = static_cast<size_t>((static_cast<unsigned __int128>(s.rng()) * s.ready.size()) >> 64);
  Fiber* f = s.ready[i];
  s.ready[i] = s.ready.back();
  s.ready.pop_back();
  return f;
}

// Leaves the running fiber f (waiting, or done) for the next one, switching to it directly rather
// than through the scheduler: one switch per resumption instead of two, with the same draws of
// the seeded order as a scheduler loop would make. f itself may be drawn (the last lane of a warp
// operation, ready again at once): it then just continues.
void leave(Fiber* f) {
  State& s = S();
  Fiber* next = pick();
  s.cur = next;
  if (next != f) fiber_switch(&f->ctx, next ? &next->ctx : &s.sched);
}

void yield() {
  State& s = S();
  Fiber* f = s.cur;
  leave(f);
  s.cur = f;
}

ThreadMain g_main = nullptr;
void* g_arg = nullptr;

void entry() {
  State& s = S();
  g_main(g_arg);
  Fiber* f = s.cur;
  if (s.at_barrier > 0) {
    for (Fiber& o : s.fibers)
      if (o.st == St::kBarrier)
        fail(thread_str(f->tid) + " exited while " + thread_str(o.tid) + " waits at the __syncthreads at " +
             o.bar_file + ":" + std::to_string(o.bar_line) + " (a barrier every thread of the block must reach)");
  }
  f->st = St::kDone;
  s.warps[static_cast<size_t>(f->tid / 32)].exited |= 1u << (f->tid % 32);
  ++s.done;
  leave(f);
  std::abort();
}

void release_barrier() {
  State& s = S();
  const Fiber* first = nullptr;
  for (Fiber& f : s.fibers) {
    if (f.st != St::kBarrier) continue;
    if (!first) first = &f;
    if (f.bar_line != first->bar_line ||
        (f.bar_file != first->bar_file && std::strcmp(f.bar_file, first->bar_file) != 0)) {
      s.error = thread_str(first->tid) + " waits at the __syncthreads at " + first->bar_file + ":" +
                std::to_string(first->bar_line) + " and " + thread_str(f.tid) + " at a different one, " + f.bar_file +
                ":" + std::to_string(f.bar_line) + " in " + where();
      return;
    }
  }
  ++s.epoch;
  s.at_barrier = 0;
  for (Fiber& f : s.fibers)
    if (f.st == St::kBarrier) f.st = St::kReady, s.ready.push_back(&f);
}

// A warp operation completes when every lane of its mask has arrived at one with the same mask.
void try_complete_warp(int warp) {
  State& s = S();
  WarpLanes& wl = s.warps[static_cast<size_t>(warp)];
  if (!wl.mixed && (wl.arrived & wl.mask) != wl.mask) return;  // lanes of the one mask still to come
  Fiber* lanes[32] = {};
  unsigned arrived = 0;
  for (int l = 0; l < 32; ++l) {
    const int tid = warp * 32 + l;
    if (tid >= s.nthreads) continue;
    lanes[l] = &s.fibers[tid];
    if (lanes[l]->st == St::kWarp) arrived |= 1u << l;
  }
  for (int l = 0; l < 32; ++l) {
    if (!(arrived >> l & 1)) continue;
    Fiber* f = lanes[l];
    const unsigned m = f->mask;
    if ((arrived & m) != m) continue;  // waiting for lanes of its mask
    for (int k = 0; k < 32; ++k)
      if (m >> k & 1) {
        Fiber* g = lanes[k];
        if (g->mask != m || g->op != f->op) {
          s.error = "warp operations of different masks or kinds meet: " + thread_str(f->tid) + " and " +
                    thread_str(g->tid) + " in " + where();
          return;
        }
      }
    uint64_t ballot = 0;
    for (int k = 0; k < 32; ++k)
      if ((m >> k & 1) && lanes[k]->value) ballot |= 1ull << k;
    for (int k = 0; k < 32; ++k) {
      if (!(m >> k & 1)) continue;
      Fiber* g = lanes[k];
      const int w = g->width, base = k / w * w, lane = k % w;
      int src = -1;
      switch (g->op) {
        case kShflIdx:
          src = base + ((g->arg % w) + w) % w;
          break;
        case kShflXor:
          src = base + ((lane ^ g->arg) < w ? (lane ^ g->arg) : lane);
          break;
        case kShflUp:
          src = lane - g->arg >= 0 ? k - g->arg : k;
          break;
        case kShflDown:
          src = lane + g->arg < w ? k + g->arg : k;
          break;
        case kBallot:
          g->result = ballot;
          break;
        case kAny:
          g->result = ballot != 0;
          break;
        case kAll:
          g->result = ballot == m;
          break;
        case kSyncWarp:
          break;
      }
      if (src >= 0) {
        if (!(m >> src & 1)) {
          s.error = thread_str(g->tid) + " reads lane " + std::to_string(src) +
                    " in a shuffle whose mask excludes it in " + where();
          return;
        }
        g->result = lanes[src]->value;
      }
    }
    if (f->op == kSyncWarp) ++s.warp_epoch[warp];
    for (int k = 0; k < 32; ++k)
      if (m >> k & 1) lanes[k]->st = St::kReady, s.ready.push_back(lanes[k]);
    arrived &= ~m;
  }
  // The lanes still waiting (at operations of other masks), summarised afresh.
  wl.arrived = arrived;
  wl.mixed = false;
  bool first = true;
  for (int l = 0; l < 32; ++l) {
    if (!(arrived >> l & 1)) continue;
    if (first)
      wl.mask = lanes[l]->mask, first = false;
    else if (lanes[l]->mask != wl.mask)
      wl.mixed = true;
  }
}

std::string states() {
  State& s = S();
  std::ostringstream o;
  int shown = 0;
  for (Fiber& f : s.fibers) {
    if (f.st == St::kDone || shown++ >= 4) continue;
    o << "; " << thread_str(f.tid)
      << (f.st == St::kBarrier ? " at __syncthreads " + std::string(f.bar_file) + ":" + std::to_string(f.bar_line)
                               : " at a warp operation of mask " + std::to_string(f.mask));
  }
  return o.str();
}

uint64_t base_seed();

void run_block(ThreadMain main, void* arg) {
  State& s = S();
  s.fibers.assign(static_cast<size_t>(s.nthreads), Fiber{});
  // Poison what the previous block used (the rest is still fresh).
  std::fill(s.smem.begin(), s.smem.begin() + static_cast<std::ptrdiff_t>(s.smem_dirty), char(0x5a));
  std::fill(s.shadow.begin(), s.shadow.begin() + static_cast<std::ptrdiff_t>((s.smem_dirty + 3) / 4), Shadow{});
  s.statics.clear();
  s.smem_used = (s.dyn_smem + 15) / 16 * 16;
  s.epoch = 1;
  s.warp_epoch.assign(static_cast<size_t>((s.nthreads + 31) / 32), 1);
  s.warps.assign(s.warp_epoch.size(), WarpLanes{});
  s.at_barrier = s.done = 0;
  s.ready.clear();
  g_main = main;
  g_arg = arg;
  for (int t = 0; t < s.nthreads; ++t) {
    Fiber& f = s.fibers[static_cast<size_t>(t)];
    f.tid = t;
    f.idx = {t % s.block.x, (t / s.block.x) % s.block.y, t / (s.block.x * s.block.y)};
    f.stack = reinterpret_cast<uintptr_t>(s.stacks) + static_cast<uintptr_t>(t) * kStackBytes;
    // Each stack's top at a different offset modulo 4 KiB: tops 64 KiB apart would all fall in the
    // same sets of the CPU's caches and evict each other at every switch.
    fiber_make(&f.ctx, reinterpret_cast<char*>(f.stack), kStackBytes - static_cast<size_t>(t % 64) * 64, entry);
    s.ready.push_back(&f);
  }
  while (s.error.empty()) {
    if (s.ready.empty()) {
      if (s.done == s.nthreads) {
        s.smem_dirty = s.smem_used;
        return;
      }
      if (s.at_barrier > 0 && s.at_barrier + s.done == s.nthreads && s.done > 0) {
        s.error = "a __syncthreads not reached by every thread (" + std::to_string(s.done) + " exited)" + states() +
                  " in " + where();
        break;
      }
      s.error = "deadlock: no thread can run" + states() + " in " + where();
      break;
    }
    // Back when no fiber is ready (all done, or a deadlock) or the block has failed.
    Fiber* f = pick();
    s.cur = f;
    fiber_switch(&s.sched, &f->ctx);
    s.cur = nullptr;
  }
  s.smem_dirty = std::max(s.smem_dirty, s.smem_used);
  // The process's seed (each launch's own is derived from it and the launch's number).
  throw Error(s.error + " [FT_VGPU_SEED=" + std::to_string(base_seed()) + " reproduces the order]");
}

uint64_t base_seed() {
  const char* e = std::getenv("FT_VGPU_SEED");
  return e && *e ? std::strtoull(e, nullptr, 0) : 0x5eed;
}

// ---- the checks of one access ----------------------------------------------------------------

[[gnu::always_inline]] inline bool ordered(const State& s, int32_t tid, uint32_t epoch, uint32_t warp_ep,
                                           const Fiber& me) {
  if (epoch < s.epoch) return true;  // a __syncthreads between
  const int w = me.tid / 32;
  return tid / 32 == w && warp_ep < s.warp_epoch[static_cast<size_t>(w)];  // a __syncwarp between
}

[[gnu::noinline]] void shared_access(uintptr_t a, size_t n, bool write) {
  State& s = S();
  const Fiber& me = *s.cur;
  const uintptr_t base = reinterpret_cast<uintptr_t>(s.smem.data());
  if (a + n > base + s.smem_used)
    fail("shared access past the block's shared memory at offset " + std::to_string(a - base));
  const uint32_t my_warp = s.warp_epoch[static_cast<size_t>(me.tid / 32)];
  for (uintptr_t w = (a - base) / 4; w <= (a + n - 1 - base) / 4; ++w) {
    Shadow& h = s.shadow[w];
    const auto off = [w] { return "shared offset " + std::to_string(w * 4); };  // for a report only
    if (write) {
      if (h.wtid >= 0 && h.wtid != me.tid && !ordered(s, h.wtid, h.wepoch, h.wwarp, me))
        fail("shared-memory race (write after write, no barrier between): " + thread_str(h.wtid) + " and " +
             thread_str(me.tid) + " at " + off());
      if (h.rtid >= 0 && (h.rtid != me.tid || h.many_readers) && !ordered(s, h.rtid, h.repoch, h.rwarp, me))
        fail("shared-memory race (write after read, no barrier between): " + thread_str(h.rtid) + " read, " +
             thread_str(me.tid) + " writes at " + off());
      h.wtid = me.tid, h.wepoch = s.epoch, h.wwarp = my_warp;
      h.rtid = -1, h.many_readers = false;
    } else {
      if (h.wtid < 0) fail("read of shared memory never written: " + thread_str(me.tid) + " at " + off());
      if (h.wtid != me.tid && !ordered(s, h.wtid, h.wepoch, h.wwarp, me))
        fail("shared-memory race (read after write, no barrier between): " + thread_str(h.wtid) + " wrote, " +
             thread_str(me.tid) + " reads at " + off());
      if (h.rtid >= 0 && h.rtid != me.tid && !ordered(s, h.rtid, h.repoch, h.rwarp, me))
        h.many_readers = true;
      else
        h.many_readers = false;
      h.rtid = me.tid, h.repoch = s.epoch, h.rwarp = my_warp;
    }
  }
}

AccessHook g_access_hook = nullptr;  // set_access_hook

// Records that `write` accesses to the allocation [lo, hi) passed their checks in this launch, and
// the access [a, a + n).
void remember(uintptr_t lo, uintptr_t hi, bool write, uintptr_t a, size_t n) {
  State& s = S();
  Checked* c = nullptr;
  for (int i = 0; i < s.nchecked && !c; ++i)
    if (s.checked[i].lo == lo) c = &s.checked[i];
  if (!c) {
    if (s.nchecked < kChecked) {
      c = &s.checked[s.nchecked++];
    } else {
      c = &s.checked[s.next_checked];
      s.next_checked = (s.next_checked + 1) % kChecked;
      if (c->read || c->write) s.evicted.push_back(*c);
    }
    *c = Checked{lo, hi, false, false, {}, {}};
  }
  (write ? c->write : c->read) = true;
  (write ? c->w : c->r).add(a, n);
}
void forget_checked() {
  S().nchecked = S().next_checked = S().last_hit = 0;
  S().evicted.clear();
}

// The executor's state, set on the OS thread that runs a launch (a stream's worker) while it runs
// one, null otherwise: host code of the kernels' files on other threads meanwhile is not a
// kernel's access. (The hooks read it instead of S(), whose guard they would test on every access.)
thread_local State* t_launch = nullptr;

// An access to neither shared memory nor the fiber's stack nor the binary, and to no allocation
// already checked in this launch: inside a registered allocation (the access hook asked once per
// launch and kind), else a bounds error.
[[gnu::noinline]] void global_access(const void* p, size_t n, bool write) {
  State& s = S();
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = s.memory.upper_bound(a);
  if (it != s.memory.begin()) {
    --it;
    if (a >= it->first && a + n <= it->first + it->second.first) {
      remember(it->first, it->first + it->second.first, write, a, n);
      return;
    }
  }
  std::ostringstream o;
  o << "global " << (write ? "write" : "read") << " of " << n << " bytes at " << p
    << " outside every device allocation";
  it = s.memory.upper_bound(a);
  if (it != s.memory.begin()) {
    --it;
    const uintptr_t end = it->first + it->second.first;
    if (a >= end)
      o << " (" << (a - end) << " bytes past the end of ";
    else  // a range (range_access) that starts inside
      o << " (its last " << (a + n - end) << " bytes past the end of ";
    o << it->second.second << " of " << it->second.first << " bytes)";
  }
  fail(o.str() + " by " + thread_str(s.cur->tid));
}

// Every load and store of the kernels: the common cases inline in each hook, cheapest first — the
// allocation the launch's last global access hit (its touched range widened), the thread's own
// stack (its parameters, its spilled locals), shared memory, the other allocations already checked
// in this launch, the binary's constants — the rest out of line. The regions are disjoint (the
// stacks are one mapping of their own, shared memory and the allocations distinct heap blocks),
// so the order changes no outcome, only the cost.
[[gnu::always_inline]] inline void access(const void* p, size_t n, bool write) {
  State* sp = t_launch;
  if (!sp) return;  // host code of the kernels' files on another thread
  State& s = *sp;
  const Fiber* me = s.cur;
  if (!me) return;  // host code of the kernels' files, between launches
  const auto a = reinterpret_cast<uintptr_t>(p);
  const auto hit = [&](Checked& c) {
    if (a >= c.lo && a + n <= c.hi && (write ? c.write : c.read)) {
      (write ? c.w : c.r).add(a, n);
      return true;
    }
    return false;
  };
  if (s.nchecked > 0 && hit(s.checked[s.last_hit])) return;
  if (a >= me->stack && a + n <= me->stack + kStackBytes) return;  // the thread's own locals
  const auto sm = reinterpret_cast<uintptr_t>(s.smem.data());
  if (a >= sm && a < sm + s.smem_limit) {
    shared_access(a, n, write);
    return;
  }
  for (int i = 0; i < s.nchecked; ++i)
    if (hit(s.checked[i])) {
      s.last_hit = i;
      return;
    }
  if (a >= reinterpret_cast<uintptr_t>(&__executable_start) && a < reinterpret_cast<uintptr_t>(&_end))
    return;  // the binary's constants
  global_access(p, n, write);
}

}  // namespace

// ---- the API of cuda_sim.h ---------------------------------------------------------------------

void set_access_hook(AccessHook hook) {
  g_access_hook = hook;
}

void range_access(const void* p, size_t n, bool write) {
  if (n) access(p, n, write);
}

void vector_access(const void* p, size_t bytes) {
  if (!t_launch || !t_launch->cur) return;
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (a % bytes != 0)
    fail("misaligned address: a " + std::to_string(bytes) + "-byte vector access " + std::to_string(a % bytes) +
         " bytes past a multiple of " + std::to_string(bytes) + " by " + thread_str(S().cur->tid));
}

bool in_memory(const void* p, size_t n) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto& m = S().memory;
  auto it = m.upper_bound(a);
  if (it == m.begin()) return false;
  --it;
  return a >= it->first && a + n <= it->first + it->second.first;
}

void register_memory(const void* p, size_t bytes, const char* what) {
  S().memory[reinterpret_cast<uintptr_t>(p)] = {bytes, what};
  forget_checked();
}
void unregister_memory(const void* p) {
  S().memory.erase(reinterpret_cast<uintptr_t>(p));
  forget_checked();
}
DeviceMemory::DeviceMemory(size_t bytes, const char* what)
    : p_(std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256)), bytes_(bytes) {
  std::memset(p_, 0x7f, bytes);
  register_memory(p_, bytes, what);
}
DeviceMemory::~DeviceMemory() {
  unregister_memory(p_);
  std::free(p_);
}

uint3 thread_idx() {
  return S().cur->idx;
}
uint3 block_idx() {
  return S().bidx;
}
uint3 block_dim() {
  const dim3& d = S().block;
  return {d.x, d.y, d.z};
}
uint3 grid_dim() {
  const dim3& d = S().grid;
  return {d.x, d.y, d.z};
}

void syncthreads(const char* file, int line) {
  State& s = S();
  Fiber* f = s.cur;
  if (s.done > 0) {
    for (Fiber& o : s.fibers)
      if (o.st == St::kDone)
        fail("__syncthreads at " + std::string(file) + ":" + std::to_string(line) + " reached by " +
             thread_str(f->tid) + " after " + thread_str(o.tid) +
             " exited (a barrier every thread of the block must reach)");
  }
  f->st = St::kBarrier;
  f->bar_file = file;
  f->bar_line = line;
  if (++s.at_barrier == s.nthreads) release_barrier();
  yield();
}

uint64_t warp_op(WarpOp op, unsigned mask, uint64_t value, int arg, int width) {
  State& s = S();
  Fiber* f = s.cur;
  const int warp = f->tid / 32, lane = f->tid % 32;
  WarpLanes& wl = s.warps[static_cast<size_t>(warp)];
  const int lanes = s.nthreads - warp * 32;
  const unsigned beyond = lanes >= 32 ? 0u : ~0u << lanes;
  if (const unsigned bad = mask & (beyond | wl.exited)) {  // the first such lane of the mask
    const int l = __builtin_ctz(bad);
    if (beyond >> l & 1)
      fail("warp operation by " + thread_str(f->tid) + " names lane " + std::to_string(l) + " beyond the block");
    fail("warp operation by " + thread_str(f->tid) + " waits for " + thread_str(warp * 32 + l) + ", which exited");
  }
  if (!(mask >> lane & 1)) fail("warp operation by " + thread_str(f->tid) + " whose mask excludes it");
  f->st = St::kWarp;
  f->op = op, f->mask = mask, f->value = value, f->arg = arg, f->width = width;
  if (wl.arrived == 0)
    wl.mask = mask;
  else if (mask != wl.mask)
    wl.mixed = true;
  wl.arrived |= 1u << lane;
  try_complete_warp(warp);
  yield();
  return f->result;
}

void* shared_static(const void* tag, size_t bytes, size_t align) {
  State& s = S();
  for (auto& [t, off] : s.statics)
    if (t == tag) return s.smem.data() + off;
  const size_t off = (s.smem_used + align - 1) / align * align;
  if (off + bytes > s.smem_limit) fail("static shared memory beyond 48 KiB");
  s.statics.emplace_back(tag, off);
  s.smem_used = off + bytes;
  return s.smem.data() + off;
}

void* shared_dynamic() {
  return S().smem.data();
}

void run_launch(const char* kernel, const char* file, int line, const void* fn, dim3 grid, dim3 block, size_t smem,
                ThreadMain main, void* arg) {
  State& s = S();
  s.kernel = kernel, s.file = file, s.line = line, s.grid = grid, s.block = block, s.dyn_smem = smem;
  s.error.clear();
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  std::string bad;
  if (grid.x < 1 || grid.y < 1 || grid.z < 1 || grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535)
    bad = "grid beyond sm_90's limits (x <= 2^31 - 1, y and z <= 65535)";
  else if (block.x < 1 || block.y < 1 || block.z < 1 || threads > kMaxThreads || block.z > 64)
    bad = "block beyond sm_90's limits (<= 1024 threads, z <= 64)";
  else if (smem > kDefaultSmem) {
    auto it = s.max_dyn_smem.find(fn);
    if (it == s.max_dyn_smem.end() || static_cast<size_t>(it->second) < smem)
      bad = std::to_string(smem) +
            " bytes of dynamic shared memory without cudaFuncSetAttribute raising the 48 KiB limit";
  }
  if (!bad.empty())
    throw Error("launch of " + std::string(kernel) + " at " + file + ":" + std::to_string(line) + ": " + bad);
  // "grid_y_cap" n > 0: at most n blocks in y, as the launchers cap a grid of more than 65535 rows,
  // so that the kernels' grid-stride loops over rows run more than once on small shapes.
  if (const int cap = fault_value("grid_y_cap"); cap > 0 && grid.y > static_cast<unsigned>(cap))
    grid.y = s.grid.y = static_cast<unsigned>(cap);
  s.seed = base_seed() ^ (0x9e3779b97f4a7c15ull * ++s.launches);
  s.rng.seed(s.seed);
  s.nthreads = static_cast<int>(threads);
  if (!s.stacks) {
    s.stacks = static_cast<char*>(mmap(nullptr, kStackBytes * kMaxThreads, PROT_READ | PROT_WRITE,
                                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
    if (s.stacks == MAP_FAILED) throw Error("vgpu: no memory for the fibers' stacks");
  }
  // Grown when needed; what earlier launches used (smem_dirty) the first block poisons again.
  s.smem_limit = std::max(smem, kDefaultSmem) + kDefaultSmem;
  if (s.smem.size() < s.smem_limit) {
    s.smem.resize(s.smem_limit, char(0x5a));
    s.shadow.resize(s.smem_limit / 4, Shadow{});
  }
  forget_checked();  // the access hook checks each launch (a stream's item) afresh
  {
    struct InLaunch {
      explicit InLaunch(State* s) { t_launch = s; }
      ~InLaunch() { t_launch = nullptr; }
    } in_launch(&s);
    for (unsigned z = 0; z < grid.z; ++z)
      for (unsigned y = 0; y < grid.y; ++y)
        for (unsigned x = 0; x < grid.x; ++x) {
          s.bidx = {x, y, z};
          run_block(main, arg);
        }
  }
  // The access hook once per allocation and kind the launch touched, with the bytes it touched.
  if (!g_access_hook) return;
  auto report = [&](const Checked& c) {
    for (const bool write : {false, true}) {
      const Touched& t = write ? c.w : c.r;
      if (t.min >= t.max) continue;
      if (const char* why = g_access_hook(c.lo, t.min, t.max, write)) throw Error(why);
    }
  };
  for (const Checked& c : s.evicted) report(c);
  for (int i = 0; i < s.nchecked; ++i) report(s.checked[i]);
}

cudaError_t func_set_attribute(const void* fn, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 || static_cast<size_t>(value) > kOptInSmem)
    return cudaErrorInvalidValue;
  S().max_dyn_smem[fn] = value;
  return cudaSuccess;
}

bool fault_enabled(const char* name) {
  auto it = S().faults.find(name);
  return it != S().faults.end() && it->second != 0;
}
int fault_value(const char* name) {
  auto it = S().faults.find(name);
  return it == S().faults.end() ? 0 : it->second;
}
void set_fault(const char* name, int value) {
  S().faults[name] = value;
}

}  // namespace vgpu

// ---- the host runtime (cudaGetLastError, streams, memory, ...) is runtime_sim.cpp ---------------

namespace cub {
namespace {
struct Sort {
  void* temp;
  size_t temp_bytes;
  const uint32_t *keys_in, *values_in;
  uint32_t *keys_out, *values_out;
  int n, begin_bit, end_bit;
};
// On the stream's worker, in order with the kernels that made the keys (a stable sort: radix
// sort's order of equal keys).
void sort(void* p) {
  const std::unique_ptr<Sort> a(static_cast<Sort*>(p));
  const int n = a->n;
  const size_t bytes = static_cast<size_t>(n) * 4;
  if (!vgpu::in_memory(a->temp, a->temp_bytes) || !vgpu::in_memory(a->keys_in, bytes) ||
      !vgpu::in_memory(a->keys_out, bytes) || !vgpu::in_memory(a->values_in, bytes) ||
      !vgpu::in_memory(a->values_out, bytes))
    throw vgpu::Error("cub::DeviceRadixSort::SortPairs: a buffer outside every device allocation");
  const uint32_t mask =
      a->end_bit - a->begin_bit >= 32 ? ~0u : ((1u << (a->end_bit - a->begin_bit)) - 1) << a->begin_bit;
  std::vector<int> order(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int x, int y) { return (a->keys_in[x] & mask) < (a->keys_in[y] & mask); });
  std::vector<uint32_t> k(static_cast<size_t>(n)), v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    k[static_cast<size_t>(i)] = a->keys_in[order[static_cast<size_t>(i)]],
    v[static_cast<size_t>(i)] = a->values_in[order[static_cast<size_t>(i)]];
  std::memcpy(a->keys_out, k.data(), bytes);
  std::memcpy(a->values_out, v.data(), bytes);
}
}  // namespace

cudaError_t DeviceRadixSort::SortPairs(void* temp, size_t& temp_bytes, const uint32_t* keys_in, uint32_t* keys_out,
                                       const uint32_t* values_in, uint32_t* values_out, int n, int begin_bit,
                                       int end_bit, cudaStream_t stream) {
  if (!temp) {
    temp_bytes = 256;
    return cudaSuccess;
  }
  vgpu::on_stream(stream, "cub::DeviceRadixSort::SortPairs", sort,
                  new Sort{temp, temp_bytes, keys_in, values_in, keys_out, values_out, n, begin_bit, end_bit});
  return cudaPeekAtLastError();
}
}  // namespace cub

// ---- the hooks GCC's -fsanitize=thread instrumentation calls ------------------------------------
#define FT_VGPU_HOOK(n)                                \
  extern "C" void __tsan_read##n(void* p) {            \
    vgpu::access(p, n, false);                         \
  }                                                    \
  extern "C" void __tsan_write##n(void* p) {           \
    vgpu::access(p, n, true);                          \
  }                                                    \
  extern "C" void __tsan_unaligned_read##n(void* p) {  \
    vgpu::access(p, n, false);                         \
  }                                                    \
  extern "C" void __tsan_unaligned_write##n(void* p) { \
    vgpu::access(p, n, true);                          \
  }
FT_VGPU_HOOK(1)
FT_VGPU_HOOK(2)
FT_VGPU_HOOK(4)
FT_VGPU_HOOK(8)
FT_VGPU_HOOK(16)
extern "C" void __tsan_read_range(void* p, unsigned long n) {
  if (n) vgpu::access(p, n, false);
}
extern "C" void __tsan_write_range(void* p, unsigned long n) {
  if (n) vgpu::access(p, n, true);
}
extern "C" void __tsan_init() {}
extern "C" void __tsan_func_entry(void*) {}
extern "C" void __tsan_func_exit() {}
extern "C" void __tsan_vptr_update(void*, void*) {}
extern "C" void __tsan_vptr_read(void*) {}

// The virtual CUDA runtime (vgpu/runtime_api.h): what our CUDA backend's host code relies on, with
// CUDA's documented semantics, on the CPU.
//
// - Streams are queues, each with a worker thread that sleeps a seeded random delay (FT_VGPU_SEED,
//   FT_VGPU_DELAY_US, default 200) before each item, so that work on different streams interleaves
//   differently from run to run unless it is ordered. Device work (kernels, copies, fills) runs
//   under one device lock: the SIMT executor is single-threaded. The legacy default stream (null)
//   runs its work at once on the calling thread, and a kernel fault there throws vgpu::Error (the
//   kernel tests rely on it); on any other stream a fault makes the device sticky.
// - Ordering is tracked with vector clocks: each item carries what it is ordered after (its
//   stream's earlier work, events it waited for, streams the host synchronised with before
//   submitting it). Every access of a kernel, copy, fill, free or declared collective is a byte
//   range [lo, hi) of one allocation (a kernel's: from the lowest to the highest byte it touched
//   there, per kind, reported by the executor when the launch ends; a copy's, fill's or
//   collective's: its buffer; a free's: the whole allocation), checked against the accesses of
//   other streams to that allocation still unordered with it: two that overlap, one of them a
//   write, with no event between → a fault naming both ops, both streams and the overlapping
//   bytes. Disjoint ranges of one allocation (one gradient bucket reduced on the communication
//   stream while the backward pass writes another) do not race. The verdict depends on the order
//   of calls only, not on the delays.
// - The pool (cudaMallocFromPoolAsync / cudaFreeAsync): a block freed on stream A is reused by an
//   allocation on stream B at once; when B is not already ordered after the free, the allocation
//   waits for it (CUDA's cudaMemPoolReuseAllowInternalDependencies). Blocks are never returned.
//   Registration with the executor (bounds checks) happens in stream order: an allocation becomes
//   valid when its stream reaches it, invalid when its free is reached.
// - Errors: per host thread (cudaGetLastError resets, cudaPeekAtLastError does not); a failed call
//   sets it, cudaErrorNotReady from a query included. A device fault (a kernel the executor fails,
//   a race) is sticky: every later call returns it, cudaGetLastError never clears it.
// - Not modelled: graph capture (refused), multiple devices, real timing (event times are the
//   workers' wall clock), the legacy default stream's implicit synchronisation.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "vgpu/cuda_sim.h"

namespace vgpu {
namespace {

using Clock = std::vector<uint64_t>;  // per stream id: the last item of that stream ordered before

void join(Clock& a, const Clock& b) {
  if (a.size() < b.size()) a.resize(b.size(), 0);
  for (size_t i = 0; i < b.size(); ++i) a[i] = std::max(a[i], b[i]);
}
uint64_t at(const Clock& c, int i) {
  return static_cast<size_t>(i) < c.size() ? c[static_cast<size_t>(i)] : 0;
}
void set_at(Clock& c, int i, uint64_t v) {
  if (c.size() <= static_cast<size_t>(i)) c.resize(static_cast<size_t>(i) + 1, 0);
  c[static_cast<size_t>(i)] = std::max(c[static_cast<size_t>(i)], v);
}

struct Stream;
struct Event {
  bool timing = true;
  Stream* stream = nullptr;  // of the last record; null: never recorded
  uint64_t seq = 0;          // the record's position on it
  Clock clock;               // what the record is ordered after (its own stream included)
  uint64_t gen = 0;          // records so far
  double ms = 0;             // when the last record was reached (workers' clock)
  uint64_t reached_gen = 0;
};

struct Item {
  std::string what;  // "kernel rmsnorm_forward (file:line)", "cudaMemsetAsync", ...
  std::function<void()> run;
  bool device = true;      // under the device lock, skipped once the device faulted
  bool always = false;     // bookkeeping (the pool's registration): runs even after a fault
  Stream* wait = nullptr;  // wait for wait->done >= wait_seq first (an event, a pool dependency)
  uint64_t wait_seq = 0;
  std::shared_ptr<Event> mark;  // an event record: its time is taken when reached
  uint64_t mark_gen = 0;
  int sid = 0;
  uint64_t seq = 0;
  Clock clock;
};

struct Stream {
  int id = 0;
  std::string name;
  std::deque<Item> queue;
  uint64_t submitted = 0, done = 0;
  Clock clock;  // what its next item is ordered after
  bool stop = false;
  std::mt19937_64 rng;
};

// An allocation as the executing items see it (created and removed in stream order).
// One access to the bytes [lo, hi) (offsets in the allocation) by item `seq` of stream `sid`.
struct Access {
  int sid = -1;
  uint64_t seq = 0;
  std::string what;
  size_t lo = 0, hi = 0;
  bool write = false;
};
struct Alloc {
  size_t bytes = 0;
  std::string name;
  // The accesses a later one may still race with: one is dropped when a later access, ordered
  // after it, covers its bytes and is a write or both are reads (whatever is unordered with the
  // later one and conflicts with the earlier one conflicts with the later one too).
  std::vector<Access> live;
};

struct Free {
  void* p;
  size_t cap;
  Stream* stream;
  uint64_t seq;
  Clock clock;
};

struct Runtime {
  std::mutex mu;  // everything below; never taken before `device` by a thread holding it
  std::condition_variable cv;
  std::recursive_mutex device;  // the executor's state (launches, registrations)
  std::map<CUstream_st*, Stream*> streams;
  Stream null_stream;
  int next_id = 1;
  Clock host;  // what the host has synchronised with (its next submissions are ordered after)
  cudaError_t sticky = cudaSuccess;
  std::string report;
  std::map<CUevent_st*, std::shared_ptr<Event>> events;
  // memory
  std::map<uintptr_t, size_t> host_allocs;  // device memory as the host sees it (submission order)
  std::map<uintptr_t, Alloc> allocs;        // as the executing items see it
  std::map<uintptr_t, size_t> pinned;
  std::map<void*, size_t> caps;  // every pool or cudaMalloc block's capacity
  std::vector<Free> free_list;
  size_t reserved = 0, used = 0;
  uint64_t release_threshold = 0;
  int reuse_flags[4] = {1, 1, 1, 1};
  uint64_t alloc_count = 0;
  uint64_t seed = 0;
  unsigned delay_us = 200;
  size_t total = size_t{8} << 30;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
};

const char* access_hook(uintptr_t base, uintptr_t lo, uintptr_t hi, bool write);

Runtime& R() {
  // Leaked: workers may still wait on its condition variable while static destructors run.
  static Runtime* r = [] {
    auto* x = new Runtime;
    x->null_stream.name = "the default stream";
    const char* e = std::getenv("FT_VGPU_SEED");
    x->seed = e && *e ? std::strtoull(e, nullptr, 0) : 0x5eed;
    if (const char* d = std::getenv("FT_VGPU_DELAY_US"); d && *d) x->delay_us = static_cast<unsigned>(std::atoi(d));
    if (const char* m = std::getenv("FT_VGPU_MEMORY_MB"); m && *m) x->total = std::strtoull(m, nullptr, 0) << 20;
    set_access_hook(access_hook);
    return x;
  }();
  return *r;
}

thread_local cudaError_t t_last = cudaSuccess;
thread_local int t_device = 0;
// The item the calling thread is running, for the access hook.
thread_local const Item* t_item = nullptr;

cudaError_t fail(cudaError_t e) {
  t_last = e;
  return e;
}

// The device's sticky error, under mu.
cudaError_t sticky_locked() {
  return R().sticky;
}
cudaError_t sticky() {
  std::lock_guard<std::mutex> lock(R().mu);
  return R().sticky;
}

void fault_locked(cudaError_t e, const std::string& report) {
  Runtime& r = R();
  if (r.sticky != cudaSuccess) return;
  r.sticky = e;
  r.report = report;
  std::fprintf(stderr, "vgpu: device fault (%s, sticky): %s\n", cudaGetErrorName(e), report.c_str());
  r.cv.notify_all();
}

std::string stream_name(int sid) {
  Runtime& r = R();
  if (sid == 0) return r.null_stream.name;
  return fmt::format("stream {}", sid);
}

// The race check of item `it`'s access to the bytes [lo, hi) of allocation `a` (under mu): false,
// with why, when it overlaps an access of another stream unordered with it, one of the two a write.
bool check_access(Alloc& a, const Item& it, size_t lo, size_t hi, bool write, std::string* why) {
  auto ordered = [&](const Access& x) { return x.sid == it.sid || at(it.clock, x.sid) >= x.seq; };
  auto verb = [](bool w) { return w ? "writes" : "reads"; };
  for (const Access& x : a.live) {
    if (x.lo >= hi || lo >= x.hi || (!write && !x.write) || ordered(x)) continue;
    *why = fmt::format(
        "cross-stream race on {}, bytes [{}, {}): {} on {} {} bytes [{}, {}) while {} on {} {} bytes [{}, {}), "
        "with no event between (cudaEventRecord + cudaStreamWaitEvent: stream_wait)",
        a.name, std::max(lo, x.lo), std::min(hi, x.hi), it.what, stream_name(it.sid), verb(write), lo, hi, x.what,
        stream_name(x.sid), verb(x.write), x.lo, x.hi);
    return false;
  }
  std::erase_if(a.live, [&](const Access& x) { return lo <= x.lo && x.hi <= hi && (write || !x.write) && ordered(x); });
  a.live.push_back(Access{it.sid, it.seq, it.what, lo, hi, write});
  return true;
}

const char* access_hook(uintptr_t base, uintptr_t lo, uintptr_t hi, bool write) {
  if (!t_item) return nullptr;
  Runtime& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.allocs.find(base);
  if (it == r.allocs.end()) return nullptr;  // registered by a test, not the runtime's
  thread_local std::string why;
  return check_access(it->second, *t_item, lo - base, hi - base, write, &why) ? nullptr : why.c_str();
}

// Copies, fills, frees and declared collectives check the bytes [p, p + n) they touch as kernels
// do (under mu; n clipped to p's allocation, SIZE_MAX: to its end). Throws vgpu::Error.
void check_range(const void* p, size_t n, bool write) {
  if (!t_item || n == 0) return;
  Runtime& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  auto& m = r.allocs;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  auto it = m.upper_bound(addr);
  if (it == m.begin()) return;
  --it;
  Alloc& a = it->second;
  const size_t lo = addr - it->first;
  if (lo >= a.bytes) return;
  const size_t hi = n >= a.bytes - lo ? a.bytes : lo + n;
  std::string why;
  if (!check_access(a, *t_item, lo, hi, write, &why)) throw Error(why);
}

cudaError_t code_of(const std::string& report) {
  return report.find("outside every device allocation") != std::string::npos ? cudaErrorIllegalAddress
                                                                             : cudaErrorLaunchFailure;
}

// Runs one item on the calling thread (a worker, or the host for the default stream).
void execute(Item& it, bool rethrow) {
  t_item = &it;
  struct Reset {
    ~Reset() { t_item = nullptr; }
  } reset;
  if (!it.device) {
    it.run();
    return;
  }
  std::lock_guard<std::recursive_mutex> lock(R().device);
  try {
    it.run();
  } catch (const Error& e) {
    if (rethrow) throw;
    std::lock_guard<std::mutex> l(R().mu);
    fault_locked(code_of(e.what()), e.what());
  }
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - R().t0).count();
}

void worker(Stream* s) {
  Runtime& r = R();
  std::unique_lock<std::mutex> lk(r.mu);
  for (;;) {
    r.cv.wait(lk, [&] { return s->stop || !s->queue.empty(); });
    if (s->queue.empty()) return;
    Item it = std::move(s->queue.front());
    s->queue.pop_front();
    if (it.wait) r.cv.wait(lk, [&] { return it.wait->done >= it.wait_seq || r.sticky != cudaSuccess; });
    const unsigned delay = r.delay_us ? static_cast<unsigned>(s->rng() % (r.delay_us + 1)) : 0;
    const bool skip = r.sticky != cudaSuccess && !it.always && it.device;
    lk.unlock();
    if (delay) std::this_thread::sleep_for(std::chrono::microseconds(delay));
    if (!skip && it.run) execute(it, false);
    lk.lock();
    if (it.mark && it.mark->gen == it.mark_gen) it.mark->ms = now_ms(), it.mark->reached_gen = it.mark_gen;
    s->done = it.seq;
    r.cv.notify_all();
  }
}

// Queues `it` on s (under lk); the default stream runs it now. Returns its position.
uint64_t submit(std::unique_lock<std::mutex>& lk, Stream* s, Item it) {
  Runtime& r = R();
  join(s->clock, r.host);
  it.sid = s->id;
  it.seq = ++s->submitted;
  it.clock = s->clock;
  const uint64_t seq = it.seq;
  if (s->id != 0) {
    s->queue.push_back(std::move(it));
    r.cv.notify_all();
    return seq;
  }
  // The default stream: on the calling thread, now (after what it waits for).
  if (it.wait) r.cv.wait(lk, [&] { return it.wait->done >= it.wait_seq || r.sticky != cudaSuccess; });
  lk.unlock();
  struct Relock {
    std::unique_lock<std::mutex>& lk;
    Stream* s;
    uint64_t seq;
    ~Relock() {
      lk.lock();
      s->done = seq;
      set_at(R().host, 0, seq);
      R().cv.notify_all();
    }
  } relock{lk, s, seq};
  if (it.run) execute(it, true);
  if (it.mark) it.mark->ms = now_ms(), it.mark->reached_gen = it.mark_gen;
  return seq;
}

// The Stream of a handle (under mu); null for an unknown one.
Stream* stream_locked(cudaStream_t h) {
  Runtime& r = R();
  if (!h) return &r.null_stream;
  auto it = r.streams.find(h);
  return it == r.streams.end() ? nullptr : it->second;
}

std::shared_ptr<Event> event_locked(cudaEvent_t h) {
  auto it = R().events.find(h);
  return it == R().events.end() ? nullptr : it->second;
}

// Waits (under lk) until s has run everything submitted so far; the host is then ordered after it.
void drain(std::unique_lock<std::mutex>& lk, Stream* s) {
  Runtime& r = R();
  const uint64_t target = s->submitted;
  r.cv.wait(lk, [&] { return s->done >= target || r.sticky != cudaSuccess; });
  join(r.host, s->clock);
  set_at(r.host, s->id, target);
}

// Device memory by the host's account (submission order), or registered by a test.
bool is_device(const void* p, size_t n) {
  {
    std::lock_guard<std::recursive_mutex> d(R().device);
    if (in_memory(p, n)) return true;
  }
  std::lock_guard<std::mutex> lock(R().mu);
  auto& m = R().host_allocs;
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = m.upper_bound(a);
  if (it == m.begin()) return false;
  --it;
  return a >= it->first && a + n <= it->first + it->second;
}
bool is_pinned(const void* p, size_t n) {
  std::lock_guard<std::mutex> lock(R().mu);
  auto& m = R().pinned;
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = m.upper_bound(a);
  if (it == m.begin()) return false;
  --it;
  return a >= it->first && a + n <= it->first + it->second;
}

// Registers [p, p + bytes) for the executor and the race check (on the item's thread).
void make_live(void* p, size_t bytes, const std::string& name) {
  Runtime& r = R();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    Alloc& a = r.allocs[reinterpret_cast<uintptr_t>(p)];
    a = Alloc{};
    a.bytes = bytes;
    a.name = name;
    if (t_item) a.live.push_back(Access{t_item->sid, t_item->seq, t_item->what, 0, bytes, true});
  }
  std::lock_guard<std::recursive_mutex> d(r.device);
  register_memory(p, bytes, r.allocs[reinterpret_cast<uintptr_t>(p)].name.c_str());
}
void make_dead(void* p) {
  Runtime& r = R();
  std::lock_guard<std::recursive_mutex> d(r.device);
  unregister_memory(p);
  std::lock_guard<std::mutex> lock(r.mu);
  r.allocs.erase(reinterpret_cast<uintptr_t>(p));
}

size_t round_cap(size_t bytes) {
  return std::max<size_t>(512, (bytes + 511) / 512 * 512);
}

cudaError_t copy2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                   cudaMemcpyKind kind, cudaStream_t h) {
  if (width > dpitch || width > spitch) return fail(cudaErrorInvalidValue);
  if (width == 0 || height == 0) return cudaSuccess;
  const size_t dspan = dpitch * (height - 1) + width, sspan = spitch * (height - 1) + width;
  const bool ddev = is_device(dst, dspan), sdev = is_device(src, sspan);
  if (kind != cudaMemcpyDefault && kind != cudaMemcpyHostToHost) {
    const bool want_d = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool want_s = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if ((want_d && !ddev) || (want_s && !sdev)) return fail(cudaErrorInvalidValue);
  }
  // Pageable host memory: the source is read at the call (staged), the destination written
  // before the call returns; pinned memory is accessed when the stream gets there.
  const bool pageable_src = !sdev && !is_pinned(src, sspan), pageable_dst = !ddev && !is_pinned(dst, dspan);
  std::shared_ptr<std::vector<char>> staged;
  if (pageable_src) {
    staged = std::make_shared<std::vector<char>>(sspan);
    std::memcpy(staged->data(), src, sspan);
  }
  Runtime& r = R();
  std::unique_lock<std::mutex> lk(r.mu);
  if (cudaError_t e = sticky_locked()) return fail(e);
  Stream* s = stream_locked(h);
  if (!s) return fail(cudaErrorInvalidResourceHandle);
  Item it;
  it.what = height > 1 ? "cudaMemcpy2DAsync" : "cudaMemcpyAsync";
  it.run = [=] {
    if (ddev) check_range(dst, dspan, true);
    if (sdev) check_range(src, sspan, false);
    const char* from = staged ? staged->data() : static_cast<const char*>(src);
    for (size_t row = 0; row < height; ++row)
      std::memmove(static_cast<char*>(dst) + row * dpitch, from + row * spitch, width);
  };
  const uint64_t seq = submit(lk, s, std::move(it));
  if (pageable_dst && s->id != 0) {
    r.cv.wait(lk, [&] { return s->done >= seq || r.sticky != cudaSuccess; });
    join(r.host, s->clock);
    set_at(r.host, s->id, seq);
    if (r.sticky) return fail(r.sticky);
  }
  return cudaSuccess;
}

}  // namespace

const char* fault_report() {
  static thread_local std::string copy;
  std::lock_guard<std::mutex> lock(R().mu);
  copy = R().report;
  return copy.c_str();
}

void reset_fault_for_tests() {
  Runtime& r = R();
  std::unique_lock<std::mutex> lk(r.mu);
  for (auto& [h, s] : r.streams) r.cv.wait(lk, [&] { return s->done >= s->submitted; });
  r.sticky = cudaSuccess;
  r.report.clear();
  for (auto& [b, a] : r.allocs) a.live.clear();
  t_last = cudaSuccess;
}

void on_stream(cudaStream_t h, const char* what, void (*fn)(void*), void* arg) {
  Runtime& r = R();
  std::unique_lock<std::mutex> lk(r.mu);
  if (cudaError_t e = sticky_locked()) return void(fail(e));
  Stream* s = stream_locked(h);
  if (!s) return void(fail(cudaErrorInvalidResourceHandle));
  Item it;
  it.what = what;
  it.run = [fn, arg] { fn(arg); };
  submit(lk, s, std::move(it));
}

// A device item touching nothing but [p, p + bytes): check_range's race check throws, execute()
// makes it a fault.
void declare_access(cudaStream_t h, const void* p, size_t bytes, bool write, const char* what) {
  Runtime& r = R();
  std::unique_lock<std::mutex> lk(r.mu);
  if (cudaError_t e = sticky_locked()) return void(fail(e));
  Stream* s = stream_locked(h);
  if (!s) return void(fail(cudaErrorInvalidResourceHandle));
  Item it;
  it.what = what;
  it.run = [p, bytes, write] { check_range(p, bytes, write); };
  submit(lk, s, std::move(it));
}

void submit_launch(cudaStream_t h, const LaunchDesc& d, ThreadMain main, void* arg, void* owner,
                   void (*destroy)(void*)) {
  std::shared_ptr<void> hold(owner, destroy);
  Runtime& r = R();
  std::unique_lock<std::mutex> lk(r.mu);
  if (cudaError_t e = sticky_locked()) return void(fail(e));
  Stream* s = stream_locked(h);
  if (!s) return void(fail(cudaErrorInvalidResourceHandle));
  Item it;
  it.what = fmt::format("kernel {} ({}:{})", d.kernel, d.file, d.line);
  it.run = [d, main, arg, hold] { run_launch(d.kernel, d.file, d.line, d.fn, d.grid, d.block, d.smem, main, arg); };
  submit(lk, s, std::move(it));
}

}  // namespace vgpu

using vgpu::fail;
using vgpu::R;

// ---- errors --------------------------------------------------------------------------------------

cudaError_t cudaGetLastError() {
  if (cudaError_t e = vgpu::sticky()) return e;
  const cudaError_t e = vgpu::t_last;
  vgpu::t_last = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() {
  if (cudaError_t e = vgpu::sticky()) return e;
  return vgpu::t_last;
}

namespace {
struct ErrorText {
  cudaError_t e;
  const char* name;
  const char* text;
};
constexpr ErrorText kErrors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
};
const ErrorText* text_of(cudaError_t e) {
  for (const ErrorText& t : kErrors)
    if (t.e == e) return &t;
  return nullptr;
}
}  // namespace

const char* cudaGetErrorString(cudaError_t e) {
  const ErrorText* t = text_of(e);
  return t ? t->text : "unrecognized error code";
}
const char* cudaGetErrorName(cudaError_t e) {
  const ErrorText* t = text_of(e);
  return t ? t->name : "cudaErrorUnknown";
}

// ---- the device ----------------------------------------------------------------------------------

cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (cudaError_t e = vgpu::sticky()) return fail(e);
  if (device != 0) return fail(cudaErrorInvalidDevice);
  vgpu::t_device = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  if (cudaError_t e = vgpu::sticky()) return fail(e);
  *device = vgpu::t_device;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "vgpu (virtual sm_90)");
  prop->totalGlobalMem = R().total;
  prop->major = 9, prop->minor = 0;
  prop->multiProcessorCount = 132;
  prop->sharedMemPerBlockOptin = 227 << 10;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (cudaError_t e = vgpu::sticky()) return fail(e);
  if (device != 0) return fail(cudaErrorInvalidDevice);
  if (attr == cudaDevAttrComputeCapabilityMajor) return *value = 9, cudaSuccess;
  if (attr == cudaDevAttrComputeCapabilityMinor) return *value = 0, cudaSuccess;
  return fail(cudaErrorInvalidValue);
}
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  auto& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.sticky) return fail(r.sticky);
  *total_bytes = r.total;
  *free_bytes = r.total - r.reserved;
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
  auto& r = R();
  std::unique_lock<std::mutex> lk(r.mu);
  for (auto& [h, s] : r.streams) vgpu::drain(lk, s);
  return r.sticky ? fail(r.sticky) : cudaSuccess;
}
cudaError_t cudaDeviceReset() {
  return cudaSuccess;  // nothing of the primary context is released (the device is process-wide here)
}

// ---- streams -------------------------------------------------------------------------------------

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* h, unsigned) {
  auto& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.sticky) return fail(r.sticky);
  // Never deleted: events and pool entries may point at it after cudaStreamDestroy.
  auto* s = new vgpu::Stream;
  s->id = r.next_id++;
  s->name = fmt::format("stream {}", s->id);
  s->rng.seed(r.seed ^ (0x9e3779b97f4a7c15ull * static_cast<uint64_t>(s->id)));
  *h = reinterpret_cast<cudaStream_t>(s);
  r.streams[*h] = s;
  std::thread(vgpu::worker, s).detach();
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* h) {
  return cudaStreamCreateWithFlags(h, cudaStreamDefault);
}
cudaError_t cudaStreamDestroy(cudaStream_t h) {
  auto& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.sticky) return fail(r.sticky);
  auto it = r.streams.find(h);
  if (!h || it == r.streams.end()) return fail(cudaErrorInvalidResourceHandle);
  it->second->stop = true;  // its worker finishes the queue, then ends
  r.streams.erase(it);
  r.cv.notify_all();
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t h) {
  auto& r = R();
  std::unique_lock<std::mutex> lk(r.mu);
  if (r.sticky) return fail(r.sticky);
  vgpu::Stream* s = vgpu::stream_locked(h);
  if (!s) return fail(cudaErrorInvalidResourceHandle);
  vgpu::drain(lk, s);
  return r.sticky ? fail(r.sticky) : cudaSuccess;
}
cudaError_t cudaStreamQuery(cudaStream_t h) {
  auto& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.sticky) return fail(r.sticky);
  vgpu::Stream* s = vgpu::stream_locked(h);
  if (!s) return fail(cudaErrorInvalidResourceHandle);
  return s->done >= s->submitted ? cudaSuccess : fail(cudaErrorNotReady);
}
cudaError_t cudaStreamWaitEvent(cudaStream_t h, cudaEvent_t e, unsigned) {
  auto& r = R();
  std::unique_lock<std::mutex> lk(r.mu);
  if (r.sticky) return fail(r.sticky);
  vgpu::Stream* s = vgpu::stream_locked(h);
  auto ev = vgpu::event_locked(e);
  if (!s || !ev) return fail(cudaErrorInvalidResourceHandle);
  if (!ev->stream) return cudaSuccess;  // never recorded: nothing to wait for
  vgpu::join(s->clock, ev->clock);
  vgpu::Item it;
  it.what = "cudaStreamWaitEvent";
  it.device = false;
  it.wait = ev->stream;
  it.wait_seq = ev->seq;
  vgpu::submit(lk, s, std::move(it));
  return cudaSuccess;
}
cudaError_t cudaLaunchHostFunc(cudaStream_t h, cudaHostFn_t fn, void* arg) {
  auto& r = R();
  std::unique_lock<std::mutex> lk(r.mu);
  if (r.sticky) return fail(r.sticky);
  vgpu::Stream* s = vgpu::stream_locked(h);
  if (!s) return fail(cudaErrorInvalidResourceHandle);
  vgpu::Item it;
  it.what = "cudaLaunchHostFunc";
  it.device = false;  // a host function may block (it must not call CUDA)
  it.run = [fn, arg] { fn(arg); };
  vgpu::submit(lk, s, std::move(it));
  return cudaSuccess;
}

// ---- events --------------------------------------------------------------------------------------

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* h, unsigned flags) {
  auto& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.sticky) return fail(r.sticky);
  auto ev = std::make_shared<vgpu::Event>();
  ev->timing = (flags & cudaEventDisableTiming) == 0;
  *h = reinterpret_cast<cudaEvent_t>(ev.get());
  r.events[*h] = std::move(ev);
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* h) {
  return cudaEventCreateWithFlags(h, cudaEventDefault);
}
cudaError_t cudaEventDestroy(cudaEvent_t h) {
  auto& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.sticky) return fail(r.sticky);
  // A pending record or wait keeps its own reference: destroying is legal at once.
  return r.events.erase(h) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t h) {
  auto& r = R();
  std::unique_lock<std::mutex> lk(r.mu);
  if (r.sticky) return fail(r.sticky);
  vgpu::Stream* s = vgpu::stream_locked(h);
  auto ev = vgpu::event_locked(e);
  if (!s || !ev) return fail(cudaErrorInvalidResourceHandle);
  vgpu::Item it;
  it.what = "cudaEventRecord";
  it.device = false;
  it.mark = ev;
  it.mark_gen = ++ev->gen;
  ev->stream = s;
  ev->seq = s->submitted + 1;
  ev->clock = s->clock;
  vgpu::join(ev->clock, r.host);
  vgpu::set_at(ev->clock, s->id, ev->seq);
  vgpu::submit(lk, s, std::move(it));
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
  auto& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.sticky) return fail(r.sticky);
  auto ev = vgpu::event_locked(e);
  if (!ev) return fail(cudaErrorInvalidResourceHandle);
  if (ev->stream && ev->stream->done < ev->seq) return fail(cudaErrorNotReady);  // sets the last error too
  vgpu::join(r.host, ev->clock);
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  auto& r = R();
  std::unique_lock<std::mutex> lk(r.mu);
  if (r.sticky) return fail(r.sticky);
  auto ev = vgpu::event_locked(e);
  if (!ev) return fail(cudaErrorInvalidResourceHandle);
  if (ev->stream) r.cv.wait(lk, [&] { return ev->stream->done >= ev->seq || r.sticky != cudaSuccess; });
  vgpu::join(r.host, ev->clock);
  return r.sticky ? fail(r.sticky) : cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  auto& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.sticky) return fail(r.sticky);
  auto a = vgpu::event_locked(start), b = vgpu::event_locked(end);
  if (!a || !b || !a->timing || !b->timing) return fail(cudaErrorInvalidResourceHandle);
  if (!a->stream || !b->stream) return fail(cudaErrorInvalidResourceHandle);
  if (a->reached_gen != a->gen || b->reached_gen != b->gen) return fail(cudaErrorNotReady);
  *ms = static_cast<float>(b->ms - a->ms);
  return cudaSuccess;
}

// ---- memory --------------------------------------------------------------------------------------

namespace {
int g_pool_tag;
cudaMemPool_t the_pool() {
  return reinterpret_cast<cudaMemPool_t>(&g_pool_tag);
}
}  // namespace

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  if (cudaError_t e = vgpu::sticky()) return fail(e);
  if (device != 0) return fail(cudaErrorInvalidDevice);
  *pool = the_pool();
  return cudaSuccess;
}
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
  auto& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.sticky) return fail(r.sticky);
  if (pool != the_pool()) return fail(cudaErrorInvalidValue);
  if (attr == cudaMemPoolAttrReleaseThreshold) return r.release_threshold = *static_cast<uint64_t*>(value), cudaSuccess;
  if (attr >= cudaMemPoolReuseFollowEventDependencies && attr <= cudaMemPoolReuseAllowInternalDependencies)
    return r.reuse_flags[attr] = *static_cast<int*>(value), cudaSuccess;
  return fail(cudaErrorInvalidValue);
}
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
  auto& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.sticky) return fail(r.sticky);
  if (pool != the_pool()) return fail(cudaErrorInvalidValue);
  switch (attr) {
    case cudaMemPoolAttrReleaseThreshold:
      return *static_cast<uint64_t*>(value) = r.release_threshold, cudaSuccess;
    case cudaMemPoolAttrReservedMemCurrent:
      return *static_cast<uint64_t*>(value) = r.reserved, cudaSuccess;
    case cudaMemPoolAttrUsedMemCurrent:
      return *static_cast<uint64_t*>(value) = r.used, cudaSuccess;
    default:
      if (attr >= cudaMemPoolReuseFollowEventDependencies && attr <= cudaMemPoolReuseAllowInternalDependencies)
        return *static_cast<int*>(value) = r.reuse_flags[attr], cudaSuccess;
  }
  return fail(cudaErrorInvalidValue);
}

cudaError_t cudaMallocFromPoolAsync(void** p, size_t bytes, cudaMemPool_t pool, cudaStream_t h) {
  auto& r = R();
  std::unique_lock<std::mutex> lk(r.mu);
  if (r.sticky) return fail(r.sticky);
  vgpu::Stream* s = vgpu::stream_locked(h);
  if (!s) return fail(cudaErrorInvalidResourceHandle);
  if (pool != the_pool() || !p) return fail(cudaErrorInvalidValue);
  const size_t cap = vgpu::round_cap(bytes);
  // A block of this size freed before, preferably one this stream is already ordered after.
  auto best = r.free_list.end();
  for (auto it = r.free_list.begin(); it != r.free_list.end(); ++it) {
    if (it->cap != cap) continue;
    if (it->stream == s || vgpu::at(s->clock, it->stream->id) >= it->seq) {
      best = it;
      break;
    }
    if (best == r.free_list.end()) best = it;
  }
  void* block = nullptr;
  vgpu::Item it;
  if (best != r.free_list.end()) {
    block = best->p;
    if (best->stream != s && vgpu::at(s->clock, best->stream->id) < best->seq) {
      // Another stream's free this one is not ordered after: the allocation waits for it.
      it.wait = best->stream;
      it.wait_seq = best->seq;
      vgpu::join(s->clock, best->clock);
    }
    r.free_list.erase(best);
  } else {
    if (r.reserved + cap > r.total) return fail(cudaErrorMemoryAllocation);
    block = std::aligned_alloc(256, cap);
    if (!block) return fail(cudaErrorMemoryAllocation);
    std::memset(block, 0x7f, cap);  // fresh memory's contents are not zeros
    r.reserved += cap;
    r.caps[block] = cap;
  }
  r.used += cap;
  r.host_allocs[reinterpret_cast<uintptr_t>(block)] = bytes;
  const std::string name = fmt::format("pool allocation #{} ({} bytes at {})", ++r.alloc_count, bytes, block);
  it.what = "cudaMallocAsync";
  it.always = true;
  it.run = [block, bytes, name] { vgpu::make_live(block, bytes, name); };
  vgpu::submit(lk, s, std::move(it));
  *p = block;
  return cudaSuccess;
}
cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t h) {
  return cudaMallocFromPoolAsync(p, bytes, the_pool(), h);
}
cudaError_t cudaFreeAsync(void* p, cudaStream_t h) {
  if (!p) return cudaSuccess;
  auto& r = R();
  std::unique_lock<std::mutex> lk(r.mu);
  if (r.sticky) return fail(r.sticky);
  vgpu::Stream* s = vgpu::stream_locked(h);
  if (!s) return fail(cudaErrorInvalidResourceHandle);
  auto a = r.host_allocs.find(reinterpret_cast<uintptr_t>(p));
  auto c = r.caps.find(p);
  if (a == r.host_allocs.end() || c == r.caps.end()) return fail(cudaErrorInvalidValue);
  r.host_allocs.erase(a);
  r.used -= c->second;
  vgpu::Item it;
  it.what = "cudaFreeAsync";
  it.always = true;
  it.run = [p] {
    vgpu::check_range(p, SIZE_MAX, true);  // a free is a write: every other stream's use must be ordered before it
    vgpu::make_dead(p);
  };
  const uint64_t seq = vgpu::submit(lk, s, std::move(it));
  vgpu::Clock clock = s->clock;
  vgpu::set_at(clock, s->id, seq);
  r.free_list.push_back(vgpu::Free{p, c->second, s, seq, std::move(clock)});
  return cudaSuccess;
}
cudaError_t cudaMalloc(void** p, size_t bytes) {
  // The pool on the default stream (at once): not stream-ordered, as cudaMalloc.
  return cudaMallocFromPoolAsync(p, bytes, the_pool(), nullptr);
}
cudaError_t cudaFree(void* p) {
  if (cudaError_t e = cudaDeviceSynchronize()) return e;  // cudaFree synchronises the device
  return cudaFreeAsync(p, nullptr);
}
cudaError_t cudaMallocHost(void** p, size_t bytes) {
  auto& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.sticky) return fail(r.sticky);
  *p = std::aligned_alloc(256, vgpu::round_cap(bytes));
  if (!*p) return fail(cudaErrorMemoryAllocation);
  r.pinned[reinterpret_cast<uintptr_t>(*p)] = bytes;
  return cudaSuccess;
}
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned) {
  return cudaMallocHost(p, bytes);
}
cudaError_t cudaFreeHost(void* p) {
  if (!p) return cudaSuccess;
  auto& r = R();
  std::unique_lock<std::mutex> lk(r.mu);
  if (r.sticky) return fail(r.sticky);
  auto it = r.pinned.find(reinterpret_cast<uintptr_t>(p));
  if (it == r.pinned.end()) return fail(cudaErrorInvalidValue);
  for (auto& [h, s] : r.streams) vgpu::drain(lk, s);  // cudaFreeHost waits for the device
  r.pinned.erase(it);
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* a, const void* p) {
  if (cudaError_t e = vgpu::sticky()) return fail(e);
  *a = cudaPointerAttributes{cudaMemoryTypeUnregistered, -1, nullptr, nullptr};
  if (vgpu::is_device(p, 1)) {
    *a = cudaPointerAttributes{cudaMemoryTypeDevice, 0, const_cast<void*>(p), nullptr};
  } else if (vgpu::is_pinned(p, 1)) {
    *a = cudaPointerAttributes{cudaMemoryTypeHost, 0, const_cast<void*>(p), const_cast<void*>(p)};
  }
  return cudaSuccess;
}
cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                              cudaMemcpyKind kind, cudaStream_t s) {
  return vgpu::copy2d(dst, dpitch, src, spitch, width, height, kind, s);
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s) {
  return vgpu::copy2d(dst, bytes, src, bytes, bytes, 1, kind, s);
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (cudaError_t e = cudaDeviceSynchronize()) return e;
  return vgpu::copy2d(dst, bytes, src, bytes, bytes, 1, kind, nullptr);
}
cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t h) {
  if (bytes == 0) return cudaSuccess;
  if (!vgpu::is_device(dst, bytes)) return fail(cudaErrorInvalidValue);
  auto& r = R();
  std::unique_lock<std::mutex> lk(r.mu);
  if (r.sticky) return fail(r.sticky);
  vgpu::Stream* s = vgpu::stream_locked(h);
  if (!s) return fail(cudaErrorInvalidResourceHandle);
  vgpu::Item it;
  it.what = "cudaMemsetAsync";
  it.run = [=] {
    vgpu::check_range(dst, bytes, true);
    if (!vgpu::in_memory(dst, bytes)) throw vgpu::Error("cudaMemsetAsync outside every device allocation");
    std::memset(dst, value, bytes);
  };
  vgpu::submit(lk, s, std::move(it));
  return cudaSuccess;
}

// ---- graph capture: not modelled -----------------------------------------------------------------

cudaError_t cudaStreamIsCapturing(cudaStream_t, cudaStreamCaptureStatus* status) {
  if (cudaError_t e = vgpu::sticky()) return fail(e);
  *status = cudaStreamCaptureStatusNone;
  return cudaSuccess;
}
cudaError_t cudaStreamBeginCapture(cudaStream_t, cudaStreamCaptureMode) {
  return fail(cudaErrorStreamCaptureUnsupported);
}
cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t* graph) {
  *graph = nullptr;
  return fail(cudaErrorStreamCaptureUnsupported);
}
cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t, unsigned long long) {
  *exec = nullptr;
  return fail(cudaErrorNotSupported);
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t, cudaStream_t) {
  return fail(cudaErrorNotSupported);
}
cudaError_t cudaGraphDestroy(cudaGraph_t) {
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t) {
  return cudaSuccess;
}

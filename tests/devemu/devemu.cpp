#include "devemu.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "arena.h"
#include "kernels/ops.h"
#include "tensor/backend.h"
#include "tensor/device_runtime.h"
#include "tensor/memory.h"
#include "util/error.h"

namespace ft::devemu {
namespace {

// ---- what crossed the (emulated) bus -----------------------------------------------------------

struct Stats {
  std::atomic<int64_t> h2d_calls{0}, h2d_bytes{0}, d2h_calls{0}, d2h_bytes{0}, d2d_calls{0}, d2d_bytes{0};
  std::atomic<int64_t> side_d2h_bytes{0}, max_d2h_bytes{0}, ops{0}, fills{0}, contexts{0}, side_contexts{0};
  std::atomic<int64_t> stream_waits{0}, synchronizes{0}, queued_ops{0};
  std::atomic<int64_t> graph_captures{0}, graph_replays{0}, graph_ops{0};  // graph_ops: each replay's ops
};
Stats g_stats;

void write_stats() {
  const char* path = std::getenv("FT_DEVEMU_STATS");
  if (!path || !*path) return;
  std::string file = path;
  if (const char* r = std::getenv("OMPI_COMM_WORLD_RANK")) file += std::string(".") + r;
  FILE* f = std::fopen(file.c_str(), "w");
  if (!f) return;
  const Stats& s = g_stats;
  std::fprintf(
      f,
      "{\"h2d_calls\": %ld, \"h2d_bytes\": %ld, \"d2h_calls\": %ld, \"d2h_bytes\": %ld, \"d2d_calls\": %ld, "
      "\"d2d_bytes\": %ld, \"side_d2h_bytes\": %ld, \"max_d2h_bytes\": %ld, \"ops\": %ld, \"fills\": %ld, "
      "\"contexts\": %ld, \"side_contexts\": %ld, \"stream_waits\": %ld, \"synchronizes\": %ld, \"queued_ops\": %ld, "
      "\"graph_captures\": %ld, \"graph_replays\": %ld, \"graph_ops\": %ld}\n",
      s.h2d_calls.load(), s.h2d_bytes.load(), s.d2h_calls.load(), s.d2h_bytes.load(), s.d2d_calls.load(),
      s.d2d_bytes.load(), s.side_d2h_bytes.load(), s.max_d2h_bytes.load(), s.ops.load(), s.fills.load(),
      s.contexts.load(), s.side_contexts.load(), s.stream_waits.load(), s.synchronizes.load(), s.queued_ops.load(),
      s.graph_captures.load(), s.graph_replays.load(), s.graph_ops.load());
  std::fclose(f);
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "devemu: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// ---- graphs: a capture records the ops, copies and fills queued on its stream; a replay re-runs
// them ------------------------------------------------------------------------------------------
//
// As CUDA's thread-local capture mode: only the capturing thread's calls are checked; everything
// it does that a CUDA graph cannot hold, or that would make the replay differ from the eager run,
// breaks the capture (cudaErrorStreamCaptureUnsupported / ...Invalidated on a GPU): a host
// synchronisation, a copy the host reads (device to host, or from pageable memory), work on
// another stream, allocating or freeing device memory.

struct Capture {
  const void* stream = nullptr;  // the capturing stream; null: no capture
  std::thread::id thread;
  std::vector<std::function<void()>> work;
  std::string broken;  // what broke it (the first such call), "" while it holds
};
Capture g_capture;  // touched by the capturing thread only while one is on

struct Graph {
  std::vector<std::function<void()>> work;
};

bool capturing_here() {
  return g_capture.stream != nullptr && g_capture.thread == std::this_thread::get_id();
}

// The capture is broken by `what`: an ft::Error now, and end_capture's error later.
[[noreturn]] void break_capture(const std::string& what) {
  const std::string msg =
      "CUDA graph capture broken by " + what + " (cudaErrorStreamCaptureUnsupported on a GPU, here the emulator's)";
  if (g_capture.broken.empty()) g_capture.broken = msg;
  throw Error(msg, "the captured step must only queue device work: read results back after it");
}

// ---- the runtime: devices and streams ----------------------------------------------------------

StreamHooks g_hooks;

// A stream token: what ExecContext::stream points at for the emulated GPU.
struct Stream {
  int device = 0;
  bool side = false;
  ~Stream() {
    if (g_hooks.released) g_hooks.released(this);
  }
};

int devices() {
  static const int n = [] {
    const char* s = std::getenv("FT_DEVEMU_DEVICES");
    return s && *s ? std::atoi(s) : 1;
  }();
  return n;
}

std::string unavailable_reason() {
  return devices() > 0 ? "" : "FT_DEVEMU_DEVICES=0: the emulated GPU has no devices";
}

// The stream of each device's first (non-side) context: the device's memory stream, as the CUDA
// backend's (backends/cuda/runtime.h), which a copy or fill on a bare {device} context uses.
std::mutex g_first_mu;
std::map<int, const void*> g_first_stream;

ExecContext context_on(int index, bool side) {
  auto s = std::make_shared<Stream>(Stream{index, side});
  if (!side) {
    std::lock_guard<std::mutex> lock(g_first_mu);
    g_first_stream.emplace(index, s.get());
  }
  ExecContext ctx;
  ctx.device = Device::kCUDA;
  ctx.device_index = index;
  ctx.stream = s.get();
  ctx.owner = s;
  (side ? g_stats.side_contexts : g_stats.contexts)++;
  return ctx;
}

ExecContext make_context(int index) {
  return context_on(index, false);
}
ExecContext make_side(const ExecContext& ctx) {
  return context_on(ctx.device_index, true);
}
void stream_wait(const ExecContext& waiter, const ExecContext& on) {
  if (capturing_here() && waiter.stream != on.stream) break_capture("stream_wait (a join with another stream)");
  g_stats.stream_waits++;  // work runs in call order: what was queued before has finished
}
void synchronize(const ExecContext&) {
  if (capturing_here()) break_capture("synchronize (the host waits for the stream)");
  g_stats.synchronizes++;
}

// A context the runtime made for the emulated GPU (an op on a host context or a hand-made one is a
// bug the real backend would turn into a wrong stream or a crash).
const Stream& stream_of(const ExecContext& ctx, const char* what) {
  if (ctx.device != Device::kCUDA || ctx.stream == nullptr || ctx.owner == nullptr)
    die(std::string(what) + " on a context the emulated GPU's runtime did not make (device " + device_name(ctx.device) +
        ", no stream)");
  return *static_cast<const Stream*>(ctx.stream);
}

// Whether the calling thread's call on `stream` is recorded instead of run (breaking the capture
// when it is on another stream).
bool record(const void* stream, const std::string& what) {
  if (!capturing_here()) return false;
  if (stream == nullptr) {  // a bare {device} context: the device's memory stream
    std::lock_guard<std::mutex> lock(g_first_mu);
    auto it = g_first_stream.find(static_cast<const Stream*>(g_capture.stream)->device);
    if (it != g_first_stream.end()) stream = it->second;
  }
  if (stream != g_capture.stream) break_capture(what + " on a stream other than the capturing one");
  return true;
}

void begin_capture(const ExecContext& ctx) {
  stream_of(ctx, "begin_capture");
  if (g_capture.stream != nullptr) die("begin_capture while a capture is on");
  g_capture = Capture{ctx.stream, std::this_thread::get_id(), {}, ""};
}

void* end_capture(const ExecContext& ctx) {
  if (g_capture.stream == nullptr || g_capture.stream != ctx.stream)
    die("end_capture on a stream that is not capturing");
  Capture c = std::move(g_capture);
  g_capture = Capture{};
  if (!c.broken.empty()) throw Error(c.broken, "the captured step must only queue device work");
  g_stats.graph_captures++;
  return new Graph{std::move(c.work)};
}

void replay_graph(void* graph, const ExecContext& ctx) {
  stream_of(ctx, "replay_graph");
  if (capturing_here()) break_capture("a graph replay");
  g_stats.graph_replays++;
  for (const auto& w : static_cast<Graph*>(graph)->work) {
    g_stats.graph_ops++;
    w();
  }
}

void free_graph(void* graph) {
  delete static_cast<Graph*>(graph);
}

// ---- ops: the CPU kernels, inside the arena ------------------------------------------------------

template <typename T>
void check_arg(OpId op, int i, const T& a) {
  if constexpr (std::is_pointer_v<T>) {
    if (a != nullptr && !GuardedArena::instance().contains(a))
      die(std::string("op ") + op_name(op) + ": argument " + std::to_string(i) +
          " is not device memory (a host pointer handed to a GPU op)");
  }
}

template <typename... A>
void check_args(OpId op, const A&... a) {
  int i = 0;
  (check_arg(op, i++, a), ...);
}

// An op runs now, or is queued on the stream a hook maps its context to (by value: every op
// argument is a pointer or a scalar).
#define FT_OP(name, params, args)                                                          \
  void name(const ExecContext& ctx, FT_OP_UNPAREN params) {                                \
    stream_of(ctx, "op " #name);                                                           \
    check_args(OpId::name, FT_OP_UNPAREN args);                                            \
    auto run = [=] {                                                                       \
      GuardedArena::Access open;                                                           \
      g_stats.ops++;                                                                       \
      cpu::name(cpu_context(), FT_OP_UNPAREN args);                                        \
    };                                                                                     \
    if (record(ctx.stream, "op " #name))                                                   \
      g_capture.work.push_back(run);                                                       \
    else if (g_hooks.queue && g_hooks.queue(ctx.stream, [ctx, run] { (void)ctx, run(); })) \
      g_stats.queued_ops++;                                                                \
    else                                                                                   \
      run();                                                                               \
  }
#include "kernels/op_decls.inc"
#undef FT_OP

constexpr OpTable make_table() {
  OpTable t;
  t.backend = "devemu";
#define FT_OP(name, params, args) t.name = &name;
#include "kernels/op_decls.inc"
#undef FT_OP
  return t;
}
constinit const OpTable kTable = make_table();

// ---- memory --------------------------------------------------------------------------------------

// The live blocks: where each starts -> (bytes, the allocation clock when it was made).
struct Live {
  std::mutex mu;
  uint64_t clock = 0;
  std::map<uintptr_t, std::pair<size_t, uint64_t>> blocks;
};
Live& live() {
  static auto* l = new Live;  // never destroyed: frees may run at exit
  return *l;
}

void* dev_alloc(size_t bytes) {
  if (capturing_here()) break_capture("an allocation of " + std::to_string(bytes) + " bytes of device memory");
  void* p = GuardedArena::instance().alloc(bytes);
  if (p) {  // like cudaMalloc: the contents are not zeros (NaN as fp32, bf16 and fp16)
    GuardedArena::Access open;
    std::memset(p, 0xFF, bytes);
  }
  if (p) {
    std::lock_guard<std::mutex> lock(live().mu);
    live().blocks[reinterpret_cast<uintptr_t>(p)] = {bytes, ++live().clock};
  }
  return p;
}

void dev_free(void* p, size_t bytes) {
  if (capturing_here() && g_capture.broken.empty())  // mem_free is noexcept: end_capture reports it
    g_capture.broken = "CUDA graph capture broken by freeing " + std::to_string(bytes) + " bytes of device memory";
  {
    std::lock_guard<std::mutex> lock(live().mu);
    live().blocks.erase(reinterpret_cast<uintptr_t>(p));
  }
  GuardedArena::instance().free(p, bytes);
}

void check_side(const void* p, Device dev, size_t span, const char* what) {
  const bool on_device = GuardedArena::instance().contains(p, span);
  if (dev == Device::kCUDA && !on_device) die(std::string(what) + " named as cuda memory is not in the emulated GPU");
  if (dev == Device::kCPU && GuardedArena::instance().contains(p))
    die(std::string(what) + " named as host memory lies in the emulated GPU");
}

// "Pinned" host memory (host_alloc below): where it lies, so that a capture can tell it from
// pageable memory (a CUDA graph copies from pinned memory only).
struct Pinned {
  std::mutex mu;
  std::map<uintptr_t, size_t> blocks;  // start -> bytes
};
Pinned& pinned() {
  static auto* p = new Pinned;  // never destroyed: frees may run at exit
  return *p;
}
bool is_pinned(const void* p, size_t span) {
  const auto x = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(pinned().mu);
  auto it = pinned().blocks.upper_bound(x);
  if (it == pinned().blocks.begin()) return false;
  --it;
  return x + span <= it->first + it->second;
}

void dev_copy_2d(const ExecContext& ctx, void* dst, Device dst_dev, size_t dst_pitch, const void* src, Device src_dev,
                 size_t src_pitch, size_t row_bytes, size_t rows) {
  // A context without a stream is the device's default stream (Tensor::copy_from): allowed for copies.
  if (ctx.device != Device::kCUDA) die("a copy to or from cuda memory on a host context");
  const bool side = ctx.stream != nullptr && static_cast<const Stream*>(ctx.stream)->side;
  check_side(dst, dst_dev, dst_pitch * (rows - 1) + row_bytes, "the copy's destination");
  check_side(src, src_dev, src_pitch * (rows - 1) + row_bytes, "the copy's source");
  const auto bytes = static_cast<int64_t>(row_bytes * rows);
  auto run = [=] {
    if (g_hooks.drain && ctx.stream) g_hooks.drain(ctx.stream);
    if (src_dev == Device::kCPU) {
      g_stats.h2d_calls++, g_stats.h2d_bytes += bytes;
    } else if (dst_dev == Device::kCPU) {
      g_stats.d2h_calls++, g_stats.d2h_bytes += bytes;
      if (side) g_stats.side_d2h_bytes += bytes;
      int64_t m = g_stats.max_d2h_bytes.load();
      while (bytes > m && !g_stats.max_d2h_bytes.compare_exchange_weak(m, bytes)) {
      }
    } else {
      g_stats.d2d_calls++, g_stats.d2d_bytes += bytes;
    }
    GuardedArena::Access open;
    auto* d = static_cast<char*>(dst);
    const auto* c = static_cast<const char*>(src);
    if (rows == 1) {
      std::memmove(d, c, row_bytes);
      return;
    }
    for (size_t r = 0; r < rows; ++r) std::memcpy(d + r * dst_pitch, c + r * src_pitch, row_bytes);
  };
  if (capturing_here()) {
    const std::string what = "a copy of " + std::to_string(bytes) + " bytes";
    if (dst_dev == Device::kCPU) break_capture(what + " to the host (the host reads device memory)");
    if (src_dev == Device::kCPU && !is_pinned(src, src_pitch * (rows - 1) + row_bytes))
      break_capture(what + " from pageable host memory");
    if (record(ctx.stream, what)) {
      g_capture.work.push_back(run);
      return;
    }
  }
  run();
}

// mem_alloc's poison and mem_free's zeroing fill with a bare {device} context: allowed for fills.
void dev_fill(const ExecContext& ctx, void* dst, uint8_t byte, size_t bytes) {
  if (ctx.device != Device::kCUDA) die("a fill of cuda memory from a host context");
  check_side(dst, Device::kCUDA, bytes, "the fill's destination");
  auto run = [=] {
    if (g_hooks.drain && ctx.stream) g_hooks.drain(ctx.stream);
    g_stats.fills++;
    GuardedArena::Access open;
    std::memset(dst, byte, bytes);
  };
  if (record(ctx.stream, "a fill of " + std::to_string(bytes) + " bytes"))
    g_capture.work.push_back(run);
  else
    run();
}

bool dev_contains(const void* p) {
  return GuardedArena::instance().contains(p);
}

// "Pinned" host memory: plain host memory outside the arena.
void* host_alloc(size_t bytes) {
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (p) {
    std::lock_guard<std::mutex> lock(pinned().mu);
    pinned().blocks[reinterpret_cast<uintptr_t>(p)] = bytes;
  }
  return p;
}
void host_free(void* p, size_t) {
  {
    std::lock_guard<std::mutex> lock(pinned().mu);
    pinned().blocks.erase(reinterpret_cast<uintptr_t>(p));
  }
  std::free(p);
}

}  // namespace

// The emulated GPU's memory: FT_DEVEMU_BYTES less the live blocks (every device shares the arena).
bool memory_info(int, DeviceMemoryInfo* out) {
  size_t live_bytes = 0;
  {
    std::lock_guard<std::mutex> lock(live().mu);
    for (const auto& [start, block] : live().blocks) live_bytes += block.first;
  }
  const size_t total = GuardedArena::instance().capacity();
  *out = DeviceMemoryInfo{total - std::min(total, live_bytes), total, "host-emulated GPU"};
  return true;
}

void set_stream_hooks(const StreamHooks& hooks) {
  g_hooks = hooks;
}

uint64_t allocation_clock() {
  std::lock_guard<std::mutex> lock(live().mu);
  return live().clock;
}

uint64_t allocated_at(const void* p) {
  const auto x = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(live().mu);
  auto it = live().blocks.upper_bound(x);
  if (it == live().blocks.begin()) return 0;
  --it;
  return x < it->first + it->second.first ? it->second.second : 0;
}

// "auto" as the CUDA backend decides it, from the emulated device's compute capability:
// FT_DEVEMU_CC ("9.0" unless set; "7.5" emulates a GPU without bf16 tensor cores).
static PrecisionChoice auto_precision(const ExecContext&, int) {
  const char* cc = std::getenv("FT_DEVEMU_CC");
  int major = 9, minor = 0;
  if (cc != nullptr && std::sscanf(cc, "%d.%d", &major, &minor) != 2)
    die(std::string("FT_DEVEMU_CC=") + cc + ": expected MAJOR.MINOR, e.g. 9.0");
  return gpu_auto_precision(device_name(Device::kCUDA), major, minor);
}

void register_emulated_gpu() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_backend(Backend{.device = Device::kCUDA,
                             .ops = &kTable,
                             .runtime = {.device_count = devices,
                                         .unavailable_reason = unavailable_reason,
                                         .make_context = make_context,
                                         .make_side_context = make_side,
                                         .stream_wait = stream_wait,
                                         .synchronize = synchronize,
                                         // work runs in call order: the host clock times its
                                         // streams (StreamTimer)
                                         .record_mark = nullptr,
                                         .mark_seconds = nullptr,
                                         .free_mark = nullptr,
                                         .memory_info = memory_info,
                                         .begin_capture = begin_capture,
                                         .end_capture = end_capture,
                                         .replay_graph = replay_graph,
                                         .free_graph = free_graph},
                             .memory = {.alloc = dev_alloc,
                                        .free = dev_free,
                                        .copy_2d = dev_copy_2d,
                                        .fill = dev_fill,
                                        .host_alloc = host_alloc,
                                        .host_free = host_free,
                                        .contains = dev_contains},
                             .describe = nullptr,
                             .peak_flops = nullptr,
                             .auto_precision = auto_precision});
    std::atexit(write_stats);
  });
}

}  // namespace ft::devemu

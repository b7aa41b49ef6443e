#include "devemu.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>

#include "arena.h"
#include "kernels/ops.h"
#include "tensor/backend.h"
#include "tensor/device_runtime.h"
#include "tensor/memory.h"

namespace ft::devemu {
namespace {

// ---- what crossed the (emulated) bus -----------------------------------------------------------

struct Stats {
  std::atomic<int64_t> h2d_calls{0}, h2d_bytes{0}, d2h_calls{0}, d2h_bytes{0}, d2d_calls{0}, d2d_bytes{0};
  std::atomic<int64_t> side_d2h_bytes{0}, max_d2h_bytes{0}, ops{0}, fills{0}, contexts{0}, side_contexts{0};
  std::atomic<int64_t> stream_waits{0}, synchronizes{0}, queued_ops{0};
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
      "\"contexts\": %ld, \"side_contexts\": %ld, \"stream_waits\": %ld, \"synchronizes\": %ld, \"queued_ops\": %ld}\n",
      s.h2d_calls.load(), s.h2d_bytes.load(), s.d2h_calls.load(), s.d2h_bytes.load(), s.d2d_calls.load(),
      s.d2d_bytes.load(), s.side_d2h_bytes.load(), s.max_d2h_bytes.load(), s.ops.load(), s.fills.load(),
      s.contexts.load(), s.side_contexts.load(), s.stream_waits.load(), s.synchronizes.load(), s.queued_ops.load());
  std::fclose(f);
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "devemu: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
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

ExecContext context_on(int index, bool side) {
  auto s = std::make_shared<Stream>(Stream{index, side});
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
void stream_wait(const ExecContext&, const ExecContext&) {
  g_stats.stream_waits++;  // work runs in call order: what was queued before has finished
}
void synchronize(const ExecContext&) {
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
#define FT_OP(name, params, args)                                                     \
  void name(const ExecContext& ctx, FT_OP_UNPAREN params) {                           \
    stream_of(ctx, "op " #name);                                                      \
    check_args(OpId::name, FT_OP_UNPAREN args);                                       \
    auto run = [=] {                                                                  \
      GuardedArena::Access open;                                                      \
      g_stats.ops++;                                                                  \
      cpu::name(cpu_context(), FT_OP_UNPAREN args);                                   \
    };                                                                                \
    if (g_hooks.queue && g_hooks.queue(ctx.stream, [ctx, run] { (void)ctx, run(); })) \
      g_stats.queued_ops++;                                                           \
    else                                                                              \
      run();                                                                          \
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

void dev_copy_2d(const ExecContext& ctx, void* dst, Device dst_dev, size_t dst_pitch, const void* src, Device src_dev,
                 size_t src_pitch, size_t row_bytes, size_t rows) {
  // A context without a stream is the device's default stream (Tensor::copy_from): allowed for copies.
  if (ctx.device != Device::kCUDA) die("a copy to or from cuda memory on a host context");
  const bool side = ctx.stream != nullptr && static_cast<const Stream*>(ctx.stream)->side;
  check_side(dst, dst_dev, dst_pitch * (rows - 1) + row_bytes, "the copy's destination");
  check_side(src, src_dev, src_pitch * (rows - 1) + row_bytes, "the copy's source");
  const auto bytes = static_cast<int64_t>(row_bytes * rows);
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
}

// mem_alloc's poison and mem_free's zeroing fill with a bare {device} context: allowed for fills.
void dev_fill(const ExecContext& ctx, void* dst, uint8_t byte, size_t bytes) {
  if (ctx.device != Device::kCUDA) die("a fill of cuda memory from a host context");
  check_side(dst, Device::kCUDA, bytes, "the fill's destination");
  if (g_hooks.drain && ctx.stream) g_hooks.drain(ctx.stream);
  g_stats.fills++;
  GuardedArena::Access open;
  std::memset(dst, byte, bytes);
}

bool dev_contains(const void* p) {
  return GuardedArena::instance().contains(p);
}

// "Pinned" host memory: plain host memory outside the arena.
void* host_alloc(size_t bytes) {
  return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
}
void host_free(void* p, size_t) {
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
                                         .memory_info = memory_info},
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

#include "backends/trace/trace_backend.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>

#include "backends/trace/op_costs.h"
#include "kernels/ops.h"
#include "tensor/backend.h"
#include "tensor/memory.h"
#include "util/error.h"

namespace ft::trace {
namespace {

// ---- the record ----------------------------------------------------------------------------------

std::atomic<bool> g_recording{false};
std::mutex g_mu;
std::vector<plan::OpRecord>& records() {
  static auto* r = new std::vector<plan::OpRecord>;  // never destroyed: ops may run at exit
  return *r;
}

void record(plan::OpRecord r) {
  std::lock_guard<std::mutex> lock(g_mu);
  records().push_back(std::move(r));
}

// ---- ops: their cost, nothing computed ------------------------------------------------------------

#define FT_OP(name, params, args)                                                            \
  void name(const ExecContext&, FT_OP_UNPAREN params) {                                      \
    if (g_recording.load(std::memory_order_relaxed)) record(cost::name(FT_OP_UNPAREN args)); \
  }
#include "kernels/op_decls.inc"
#undef FT_OP

constexpr OpTable make_table() {
  OpTable t;
  t.backend = "trace";
#define FT_OP(name, params, args) t.name = &name;
#include "kernels/op_decls.inc"
#undef FT_OP
  return t;
}
constinit const OpTable kTable = make_table();

// ---- memory: reserved address space, never backed ---------------------------------------------------

// One PROT_NONE range, handed out by a bump pointer (a step allocates a bounded amount; freed
// blocks are not reused: the range is address space, not memory).
struct Space {
  char* base = nullptr;
  size_t size = 0;
  std::atomic<size_t> top{0};
};
Space& space() {
  static Space* s = [] {
    auto* sp = new Space;
    for (size_t gib : {4096, 1024, 256}) {  // the first the kernel grants
      const size_t bytes = gib << 30;
      void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p != MAP_FAILED) {
        sp->base = static_cast<char*>(p);
        sp->size = bytes;
        break;
      }
    }
    FT_CHECK(sp->base != nullptr, "the recording GPU could not reserve 256 GiB of address space");
    return sp;
  }();
  return *s;
}

void* dev_alloc(size_t bytes) {
  Space& s = space();
  const size_t n = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  const size_t at = s.top.fetch_add(n);
  return at + n <= s.size ? s.base + at : nullptr;
}
void dev_free(void*, size_t) {}

bool dev_contains(const void* p) {
  const Space& s = space();
  const auto* c = static_cast<const char*>(p);
  return c >= s.base && c < s.base + s.size;
}

plan::OpRecord mem_record(const char* op, plan::OpKind kind, double read, double written, size_t row_bytes,
                          size_t rows) {
  plan::OpRecord r;
  r.op = op;
  r.kind = kind;
  r.shape = rows == 1 ? fmt::format("bytes={}", row_bytes) : fmt::format("rows={} row_bytes={}", rows, row_bytes);
  r.bytes_read = read;
  r.bytes_written = written;
  return r;
}

void copy_2d(const ExecContext&, void* dst, Device dst_dev, size_t dst_pitch, const void*, Device src_dev, size_t,
             size_t row_bytes, size_t rows) {
  const double bytes = static_cast<double>(row_bytes * rows);
  if (dst_dev == Device::kCPU) {  // what the device would send back: zeros (nothing was computed)
    for (size_t r = 0; r < rows; ++r) std::memset(static_cast<char*>(dst) + r * dst_pitch, 0, row_bytes);
  }
  if (!g_recording.load(std::memory_order_relaxed)) return;
  if (src_dev == Device::kCPU)
    record(mem_record("memcpy_h2d", plan::OpKind::kCopyH2D, 0, bytes, row_bytes, rows));
  else if (dst_dev == Device::kCPU)
    record(mem_record("memcpy_d2h", plan::OpKind::kCopyD2H, bytes, 0, row_bytes, rows));
  else
    record(mem_record("memcpy_d2d", plan::OpKind::kCopyD2D, bytes, bytes, row_bytes, rows));
}

void fill(const ExecContext&, void*, uint8_t, size_t bytes) {
  if (g_recording.load(std::memory_order_relaxed))
    record(mem_record("memset", plan::OpKind::kFill, 0, static_cast<double>(bytes), bytes, 1));
}

void* host_alloc(size_t bytes) {
  return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
}
void host_free(void* p, size_t) {
  std::free(p);
}

// ---- runtime: one H200, streams that never wait -------------------------------------------------------

struct Stream {
  int device = 0;
};

int device_count() {
  return 1;
}
std::string unavailable_reason() {
  return "";
}
ExecContext context_on(int index) {
  auto s = std::make_shared<Stream>(Stream{index});
  ExecContext ctx;
  ctx.device = Device::kCUDA;
  ctx.device_index = index;
  ctx.stream = s.get();
  ctx.owner = s;
  return ctx;
}
ExecContext make_context(int index) {
  return context_on(index);
}
ExecContext make_side(const ExecContext& ctx) {
  return context_on(ctx.device_index);
}
void stream_wait(const ExecContext&, const ExecContext&) {}
void synchronize(const ExecContext&) {}

bool memory_info(int, DeviceMemoryInfo* out) {
  const auto total = static_cast<size_t>(kRecordingGpuBytes);
  const auto live = static_cast<size_t>(std::max<int64_t>(0, MemoryTracker::global().total_live(Device::kCUDA)));
  *out = DeviceMemoryInfo{total - std::min(total, live), total, kRecordingGpuName};
  return true;
}

std::string describe(const ExecContext&) {
  return std::string("recording GPU (") + kRecordingGpuName + ", compute capability 9.0): ops are recorded, not run";
}

PrecisionChoice auto_precision(const ExecContext&, int) {
  return gpu_auto_precision(device_name(Device::kCUDA), 9, 0);
}

}  // namespace

void register_recording_gpu() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_backend_instead_of_plugin(Backend{.device = Device::kCUDA,
                                               .ops = &kTable,
                                               .runtime = {.device_count = device_count,
                                                           .unavailable_reason = unavailable_reason,
                                                           .make_context = make_context,
                                                           .make_side_context = make_side,
                                                           .stream_wait = stream_wait,
                                                           .synchronize = synchronize,
                                                           .record_mark = nullptr,
                                                           .mark_seconds = nullptr,
                                                           .free_mark = nullptr,
                                                           .memory_info = memory_info},
                                               .memory = {.alloc = dev_alloc,
                                                          .free = dev_free,
                                                          .copy_2d = copy_2d,
                                                          .fill = fill,
                                                          .host_alloc = host_alloc,
                                                          .host_free = host_free,
                                                          .contains = dev_contains},
                                               .comm = nullptr,
                                               .describe = describe,
                                               .peak_flops = nullptr,
                                               .auto_precision = auto_precision,
                                               .guess_precision = nullptr,
                                               .threads = nullptr,
                                               .computes = false});
  });
}

void start_recording() {
  std::lock_guard<std::mutex> lock(g_mu);
  records().clear();
  g_recording.store(true);
}

std::vector<plan::OpRecord> stop_recording() {
  g_recording.store(false);
  std::lock_guard<std::mutex> lock(g_mu);
  return std::exchange(records(), {});
}

}  // namespace ft::trace

#include "tensor/memory.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tensor/backend.h"
#include "util/error.h"
#include "util/log.h"
#include "util/strings.h"

namespace ft {

const char* device_name(Device d) {
  switch (d) {
    case Device::kCPU:
      return "cpu";
    case Device::kCUDA:
      return "cuda";
    case Device::kCount:
      break;
  }
  return "?";
}

const char* mem_category_name(MemCategory c) {
  switch (c) {
    case MemCategory::kParameters:
      return "parameters";
    case MemCategory::kGradients:
      return "gradients";
    case MemCategory::kOptimizerState:
      return "optimizer_state";
    case MemCategory::kActivations:
      return "activations";
    case MemCategory::kWorkspace:
      return "workspace";
    case MemCategory::kCommunication:
      return "communication";
    case MemCategory::kCheckpoint:
      return "checkpoint";
    case MemCategory::kOther:
      return "other";
    case MemCategory::kCount:
      break;
  }
  return "?";
}

// ---- accounting ---------------------------------------------------------------------------

MemoryTracker& MemoryTracker::global() {
  static MemoryTracker t;
  return t;
}

namespace {
void raise_peak(std::atomic<int64_t>& peak, int64_t v) {
  int64_t cur = peak.load();
  while (v > cur && !peak.compare_exchange_weak(cur, v)) {
  }
}
}  // namespace

void MemoryTracker::on_alloc(Device d, MemCategory c, size_t bytes) {
  Counters& k = at(d);
  const auto b = static_cast<int64_t>(bytes);
  raise_peak(k.peak[idx(c)], k.live[idx(c)].fetch_add(b) + b);
  raise_peak(k.total_peak, k.total_live.fetch_add(b) + b);
}

void MemoryTracker::on_free(Device d, MemCategory c, size_t bytes) {
  Counters& k = at(d);
  k.live[idx(c)].fetch_sub(static_cast<int64_t>(bytes));
  k.total_live.fetch_sub(static_cast<int64_t>(bytes));
}

void MemoryTracker::reset_peaks() {
  for (Counters& k : devices_) {
    for (size_t i = 0; i < kNumMemCategories; ++i) k.peak[i].store(k.live[i].load());
    k.total_peak.store(k.total_live.load());
  }
}

std::string MemoryTracker::describe_live(Device d) const {
  std::vector<std::pair<int64_t, MemCategory>> held;
  for (size_t i = 0; i < kNumMemCategories; ++i) {
    auto c = static_cast<MemCategory>(i);
    if (live(c, d) > 0) held.push_back({live(c, d), c});
  }
  std::sort(held.begin(), held.end(), [](auto& a, auto& b) { return a.first > b.first; });
  std::string parts;
  for (auto& [bytes, c] : held)
    parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", mem_category_name(c),
                         human_bytes(static_cast<double>(bytes)));
  return fmt::format("{} live on {}{}", human_bytes(static_cast<double>(total_live(d))), device_name(d),
                     parts.empty() ? "" : " (" + parts + ")");
}

// ---- the devices' memory ------------------------------------------------------------------

namespace {

void* cpu_alloc(size_t bytes) {
  return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
}
void cpu_free(void* p, size_t) {
  std::free(p);
}
void cpu_copy_2d(const ExecContext&, void* dst, Device, size_t dst_pitch, const void* src, Device, size_t src_pitch,
                 size_t row_bytes, size_t rows) {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  if (rows == 1 || (dst_pitch == row_bytes && src_pitch == row_bytes)) {
    std::memmove(d, s, row_bytes * rows);
    return;
  }
  for (size_t r = 0; r < rows; ++r) std::memcpy(d + r * dst_pitch, s + r * src_pitch, row_bytes);
}
void cpu_fill(const ExecContext&, void* dst, uint8_t byte, size_t bytes) {
  std::memset(dst, byte, bytes);
  // The memory is observed afterwards (the poison before a free must not be elided).
  __asm__ __volatile__("" : : "r"(dst) : "memory");
}

constexpr DeviceMemory kCpuMemory{cpu_alloc, cpu_free, cpu_copy_2d, cpu_fill};

// d's memory: the host's for the CPU, else its registered backend's (tensor/backend.h), or null.
// Loads no plugin: a device's backend is there once a context of it was made.
const DeviceMemory* memory_of(Device d) {
  if (d == Device::kCPU) return &kCpuMemory;
  const Backend* b = registered_backend(d);
  return b && b->memory.alloc ? &b->memory : nullptr;
}

// The backend of device d; an ft::Error when none provides it.
const DeviceMemory& backend(Device d) {
  const auto i = static_cast<size_t>(d);
  FT_CHECK(i < kNumDevices, "device {}", i);
  const DeviceMemory* m = memory_of(d);
  if (m == nullptr) {
    throw Error(fmt::format("no memory on device '{}': this build has no {} backend", device_name(d), device_name(d)),
                "train.device = \"cpu\" is the only device this build runs on");
  }
  return *m;
}

// The backend that moves bytes between dst_dev and src_dev: the host's when both are the host,
// else the device's (a copy between two different devices is not supported).
const DeviceMemory& copier(const ExecContext& ctx, Device dst_dev, Device src_dev) {
  if (dst_dev == Device::kCPU && src_dev == Device::kCPU) return backend(Device::kCPU);
  const Device d = dst_dev == Device::kCPU ? src_dev : dst_dev;
  FT_CHECK(src_dev == Device::kCPU || src_dev == d, "a copy from {} to {}", device_name(src_dev), device_name(dst_dev));
  FT_CHECK(ctx.device == d, "a copy to or from {} on a {} context", device_name(d), device_name(ctx.device));
  return backend(d);
}

#ifdef FT_POISON
constexpr bool kPoison = true;
#else
constexpr bool kPoison = false;
#endif

}  // namespace

bool device_memory_registered(Device d) {
  return static_cast<size_t>(d) < kNumDevices && memory_of(d) != nullptr;
}

bool mem_on_device(Device d, const void* p) {
  if (d == Device::kCPU || !device_memory_registered(d)) return false;
  const DeviceMemory& m = backend(d);
  return p != nullptr && m.contains != nullptr && m.contains(p);
}

bool mem_poison_build() {
  return kPoison;
}

void* mem_alloc(Device d, size_t bytes, MemCategory c) {
  if (bytes == 0) return nullptr;
  const DeviceMemory& m = backend(d);
  void* p = m.alloc(bytes);
  if (!p) {
    throw OutOfMemory(
        fmt::format("out of memory allocating {} for {} on {} ({})", human_bytes(static_cast<double>(bytes)),
                    mem_category_name(c), device_name(d), MemoryTracker::global().describe_live(d)),
        "use a smaller model, batch or sequence, or more ranks (ZeRO, tensor parallelism)");
  }
  MemoryTracker::global().on_alloc(d, c, bytes);
  if (kPoison) m.fill(ExecContext{.device = d}, p, kPoisonByte, bytes);
  return p;
}

namespace {
std::mutex g_free_mu;
std::string g_first_free_failure;
int64_t g_free_failures = 0;
}  // namespace

void mem_note_free_failure(Device d, const char* what) noexcept {
  try {
    std::string first;
    {
      std::lock_guard<std::mutex> lock(g_free_mu);
      if (g_free_failures++ > 0) return;
      g_first_free_failure = fmt::format("freeing {} memory: {}", device_name(d), what);
      first = g_first_free_failure;
    }
    log_warn("{} (later failures to free device memory are not reported)", first);
  } catch (...) {  // out of memory formatting the message: nothing more to do
  }
}

std::string mem_first_free_failure() {
  std::lock_guard<std::mutex> lock(g_free_mu);
  return g_first_free_failure;
}

int64_t mem_free_failures() {
  std::lock_guard<std::mutex> lock(g_free_mu);
  return g_free_failures;
}

void mem_free(Device d, void* p, size_t bytes, MemCategory c) noexcept {
  if (!p) return;
  try {
    const DeviceMemory& m = backend(d);
    if (kPoison) m.fill(ExecContext{.device = d}, p, kPoisonByte, bytes);
    if (d == Device::kCPU)
      secure_zero(p, bytes);
    else
      m.fill(ExecContext{.device = d}, p, 0, bytes);
    m.free(p, bytes);
  } catch (const std::exception& e) {
    mem_note_free_failure(d, e.what());
  } catch (...) {
    mem_note_free_failure(d, "an unknown exception");
  }
  MemoryTracker::global().on_free(d, c, bytes);
}

void* mem_alloc_host(Device for_device, size_t bytes, MemCategory c) {
  if (bytes == 0) return nullptr;
  const DeviceMemory& m = backend(for_device);
  void* p = m.host_alloc ? m.host_alloc(bytes) : cpu_alloc(bytes);
  if (!p) {
    throw Error(fmt::format("out of memory allocating {} of host memory for {} copies to {} ({})",
                            human_bytes(static_cast<double>(bytes)), mem_category_name(c), device_name(for_device),
                            MemoryTracker::global().describe_live(Device::kCPU)),
                "use a smaller batch, or fewer checkpoint staging buffers");
  }
  MemoryTracker::global().on_alloc(Device::kCPU, c, bytes);
  if (kPoison) std::memset(p, kPoisonByte, bytes);
  return p;
}

void mem_free_host(Device for_device, void* p, size_t bytes, MemCategory c) {
  if (!p) return;
  const DeviceMemory& m = backend(for_device);
  if (kPoison) cpu_fill(ExecContext{}, p, kPoisonByte, bytes);
  secure_zero(p, bytes);
  if (m.host_free)
    m.host_free(p, bytes);
  else
    cpu_free(p, bytes);
  MemoryTracker::global().on_free(Device::kCPU, c, bytes);
}

void mem_copy(const ExecContext& ctx, void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  copier(ctx, dst_dev, src_dev).copy_2d(ctx, dst, dst_dev, bytes, src, src_dev, bytes, bytes, 1);
}

void mem_copy_2d(const ExecContext& ctx, void* dst, Device dst_dev, size_t dst_pitch, const void* src, Device src_dev,
                 size_t src_pitch, size_t row_bytes, size_t rows) {
  if (row_bytes == 0 || rows == 0) return;
  FT_CHECK(dst_pitch >= row_bytes && src_pitch >= row_bytes, "a 2-d copy of {}-byte rows with pitches {} and {}",
           row_bytes, dst_pitch, src_pitch);
  copier(ctx, dst_dev, src_dev).copy_2d(ctx, dst, dst_dev, dst_pitch, src, src_dev, src_pitch, row_bytes, rows);
}

void mem_fill(const ExecContext& ctx, void* dst, Device dev, uint8_t byte, size_t bytes) {
  if (bytes == 0) return;
  FT_CHECK(dev == Device::kCPU || ctx.device == dev, "a fill on {} from a {} context", device_name(dev),
           device_name(ctx.device));
  backend(dev).fill(ctx, dst, byte, bytes);
}

void secure_zero(void* p, size_t bytes) {
  if (!p || bytes == 0) return;
  std::memset(p, 0, bytes);
  // Tell the compiler the zeroed memory is observed, so the memset is not elided.
  __asm__ __volatile__("" : : "r"(p) : "memory");
}

// ---- the process ----------------------------------------------------------------------------

namespace {
int64_t read_status_kb(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  size_t n = std::strlen(field);
  while (std::getline(in, line)) {
    if (line.compare(0, n, field) == 0) return std::stoll(line.substr(n + 1)) * 1024;
  }
  return 0;
}
}  // namespace

int64_t process_peak_rss_bytes() {
  return read_status_kb("VmHWM");
}
int64_t process_rss_bytes() {
  return read_status_kb("VmRSS");
}

}  // namespace ft

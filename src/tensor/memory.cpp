#include "tensor/memory.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "util/error.h"
#include "util/strings.h"

namespace ft {

const char* device_name(Device d) {
  return d == Device::kCPU ? "cpu" : "cuda";
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

void MemoryTracker::on_alloc(MemCategory c, size_t bytes) {
  int64_t b = static_cast<int64_t>(bytes);
  raise_peak(peak_[idx(c)], live_[idx(c)].fetch_add(b) + b);
  raise_peak(total_peak_, total_live_.fetch_add(b) + b);
}

void MemoryTracker::on_free(MemCategory c, size_t bytes) {
  live_[idx(c)].fetch_sub(static_cast<int64_t>(bytes));
  total_live_.fetch_sub(static_cast<int64_t>(bytes));
}

void MemoryTracker::reset_peaks() {
  for (size_t i = 0; i < kNumMemCategories; ++i) peak_[i].store(live_[i].load());
  total_peak_.store(total_live_.load());
}

void* mem_alloc(size_t bytes, MemCategory c) {
  if (bytes == 0) return nullptr;
  size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) {
    throw Error(fmt::format("out of memory allocating {} for {}", human_bytes(static_cast<double>(bytes)),
                            mem_category_name(c)),
                "use a smaller model, batch or sequence, or more ranks (ZeRO, tensor parallelism)");
  }
  MemoryTracker::global().on_alloc(c, bytes);
  return p;
}

void secure_zero(void* p, size_t bytes) {
  if (!p || bytes == 0) return;
  std::memset(p, 0, bytes);
  // Tell the compiler the zeroed memory is observed, so the memset is not elided.
  __asm__ __volatile__("" : : "r"(p) : "memory");
}

void mem_free(void* p, size_t bytes, MemCategory c) {
  if (!p) return;
  secure_zero(p, bytes);
  std::free(p);
  MemoryTracker::global().on_free(c, bytes);
}

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

// Memory accounting and the allocator every large buffer goes through.
//
// Each allocation names a category; MemoryTracker keeps live and peak bytes per category and
// in total, which is what metrics, the planner's calibration and the memory tests read.
// Freed memory is zeroed before it is returned (checkpoint staging buffers and weights may be
// secret; see docs/architecture.md, "Encryption").
//
//   void* p = ft::mem_alloc(bytes, MemCategory::kActivations);
//   ft::mem_free(p, bytes, MemCategory::kActivations);
//   ft::MemoryTracker::global().peak(MemCategory::kParameters);
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ft {

enum class Device : uint8_t { kCPU = 0, kCUDA = 1 };
const char* device_name(Device d);

enum class MemCategory : uint8_t {
  kParameters = 0,  // model weights as used by forward/backward (incl. bf16 copies)
  kGradients,       // parameter gradients (fp32 accumulation buffers)
  kOptimizerState,  // fp32 master weights, AdamW moments
  kActivations,     // tensors kept for backward, activation gradients
  kWorkspace,       // scratch: conversion buffers, logits chunks, kernel scratch
  kCommunication,   // collective buffers, gathered ZeRO-3 parameters, pipeline buffers
  kCheckpoint,      // checkpoint staging buffers
  kOther,
  kCount
};
constexpr size_t kNumMemCategories = static_cast<size_t>(MemCategory::kCount);
const char* mem_category_name(MemCategory c);  // "parameters", "gradients", ...

// Process-wide accounting (thread-safe). Accounting is not parallel state: every rank
// tracks its own process.
class MemoryTracker {
 public:
  static MemoryTracker& global();

  void on_alloc(MemCategory c, size_t bytes);
  void on_free(MemCategory c, size_t bytes);

  int64_t live(MemCategory c) const { return live_[idx(c)].load(); }
  int64_t peak(MemCategory c) const { return peak_[idx(c)].load(); }
  int64_t total_live() const { return total_live_.load(); }
  int64_t total_peak() const { return total_peak_.load(); }
  // Resets the peaks to the current live values (e.g. after start-up).
  void reset_peaks();

 private:
  static size_t idx(MemCategory c) { return static_cast<size_t>(c); }
  std::array<std::atomic<int64_t>, kNumMemCategories> live_{}, peak_{};
  std::atomic<int64_t> total_live_{0}, total_peak_{0};
};

// 64-byte aligned; throws ft::Error (naming the size and category) when out of memory.
void* mem_alloc(size_t bytes, MemCategory c);
// Zeroes the memory, then frees it.
void mem_free(void* p, size_t bytes, MemCategory c);
// Zeroes memory in a way the compiler cannot elide.
void secure_zero(void* p, size_t bytes);

// Peak resident set size of this process in bytes (VmHWM), and the current one (VmRSS).
int64_t process_peak_rss_bytes();
int64_t process_rss_bytes();

}  // namespace ft

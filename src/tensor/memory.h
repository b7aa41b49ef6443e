// Memory: the allocator every large buffer goes through, the copies and fills between buffers,
// and the accounting of both, per device.
//
// Each allocation names a device and a category; MemoryTracker keeps live and peak bytes per
// device and category, and in total per device: metrics, the planner's calibration and the
// memory tests read the CPU's. Freed memory is zeroed before it is returned (checkpoint staging
// buffers and weights may be secret; see docs/formats.md, "Rank file").
//
//   void* p = ft::mem_alloc(Device::kCPU, bytes, MemCategory::kActivations);
//   ft::mem_copy(ctx, p, Device::kCPU, src, Device::kCPU, bytes);     // ordered on ctx's stream
//   ft::mem_zero(ctx, p, Device::kCPU, bytes);
//   ft::mem_free(Device::kCPU, p, bytes, MemCategory::kActivations);
//   ft::MemoryTracker::global().peak(MemCategory::kParameters);      // the CPU's
//   ft::MemoryTracker::global().peak(MemCategory::kParameters, Device::kCUDA);
//
// A device's memory is provided by its backend (DeviceMemory): the CPU's is built in; the CUDA
// backend registers its own. Allocating on a device nobody registered is an ft::Error.
//
// The poison build (CMake -DFT_POISON=ON, `make poison`) fills every new buffer with 0xFF bytes
// — NaN as fp32, bf16 and fp16 — instead of leaving it to the allocator, and poisons freed memory
// before the zeroing: a read of memory the model has not written shows up as a NaN loss or a
// failed test. Code that needs zeros asks for them (Tensor::zeros, mem_zero, an op).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "tensor/device.h"
#include "tensor/exec_context.h"
#include "util/error.h"

namespace ft {

enum class MemCategory : uint8_t {
  kParameters = 0,  // model weights as used by forward/backward (incl. bf16 copies)
  kGradients,       // parameter gradients (fp32 accumulation buffers)
  kOptimizerState,  // fp32 master weights, AdamW moments
  kActivations,     // tensors kept for backward, activation gradients, a micro-batch's tokens
  kWorkspace,       // scratch: conversion buffers, logits chunks, kernel scratch
  kCommunication,   // collective buffers, gathered ZeRO-3 parameters, pipeline buffers
  kCheckpoint,      // checkpoint staging buffers
  kOther,
  kCount
};
constexpr size_t kNumMemCategories = static_cast<size_t>(MemCategory::kCount);
const char* mem_category_name(MemCategory c);  // "parameters", "gradients", ...

// Process-wide accounting (thread-safe), per device. Accounting is not parallel state: every rank
// tracks its own process. Without a device argument, the CPU's numbers.
class MemoryTracker {
 public:
  static MemoryTracker& global();

  void on_alloc(Device d, MemCategory c, size_t bytes);
  void on_free(Device d, MemCategory c, size_t bytes);

  int64_t live(MemCategory c, Device d = Device::kCPU) const { return at(d).live[idx(c)].load(); }
  int64_t peak(MemCategory c, Device d = Device::kCPU) const { return at(d).peak[idx(c)].load(); }
  int64_t total_live(Device d = Device::kCPU) const { return at(d).total_live.load(); }
  int64_t total_peak(Device d = Device::kCPU) const { return at(d).total_peak.load(); }
  // Resets the peaks of every device to the current live values (e.g. after start-up).
  void reset_peaks();
  // "1.2 GiB live on cuda (activations 800.0 MiB, parameters 400.0 MiB)": what holds the memory
  // (categories with live bytes, largest first) — the out-of-memory error's explanation.
  std::string describe_live(Device d) const;

 private:
  struct Counters {
    std::array<std::atomic<int64_t>, kNumMemCategories> live{}, peak{};
    std::atomic<int64_t> total_live{0}, total_peak{0};
  };
  static size_t idx(MemCategory c) { return static_cast<size_t>(c); }
  const Counters& at(Device d) const { return devices_[static_cast<size_t>(d)]; }
  Counters& at(Device d) { return devices_[static_cast<size_t>(d)]; }
  std::array<Counters, kNumDevices> devices_;
};

// What a backend provides for its device's memory. Copies and fills are ordered on the context's
// stream (a GPU's); a copy between the device and the host is the device backend's (the host
// side of it is plain host memory).
struct DeviceMemory {
  void* (*alloc)(size_t bytes) = nullptr;  // null when out of memory
  void (*free)(void* p, size_t bytes) = nullptr;
  // rows rows of row_bytes each, at dst + r * dst_pitch from src + r * src_pitch; one end may be on the host
  void (*copy_2d)(const ExecContext& ctx, void* dst, Device dst_dev, size_t dst_pitch, const void* src, Device src_dev,
                  size_t src_pitch, size_t row_bytes, size_t rows) = nullptr;
  void (*fill)(const ExecContext& ctx, void* dst, uint8_t byte, size_t bytes) = nullptr;
  // Host memory the device copies to and from asynchronously (pinned, for a GPU); null: plain host
  // memory.
  void* (*host_alloc)(size_t bytes) = nullptr;
  void (*host_free)(void* p, size_t bytes) = nullptr;
  // Whether p points into this device's memory (a host transport stages such buffers through host
  // memory: parallel/comm/host_staged_comm.h); null: never.
  bool (*contains)(const void* p) = nullptr;
};
// Whether d is allocatable: the CPU always; another device when its Backend (tensor/backend.h),
// which carries its DeviceMemory, is registered.
bool device_memory_registered(Device d);
// Whether p is memory of device d (always false for the CPU: host memory is not "on a device").
bool mem_on_device(Device d, const void* p);

// Out of a device's memory: the message names the request, its category and what holds the
// device's memory (MemoryTracker::describe_live); `fluxtrain train` adds the planner's estimate.
class OutOfMemory : public Error {
 public:
  using Error::Error;
};

// 64-byte aligned (a device's own alignment elsewhere); throws OutOfMemory naming the size, the
// category and what holds the device's memory when out of memory, ft::Error when no backend
// provides the device's memory. Contents: undefined (0xFF bytes in the poison build).
void* mem_alloc(Device d, size_t bytes, MemCategory c);
inline void* mem_alloc(const ExecContext& ctx, size_t bytes, MemCategory c) {
  return mem_alloc(ctx.device, bytes, c);
}
// Poisons (poison build) and zeroes the memory, then frees it. Never throws (it runs in
// destructors, also while an error unwinds the stack): a device that fails to zero or free (a GPU
// after a sticky fault) is reported once (mem_note_free_failure); the tracker counts it freed.
void mem_free(Device d, void* p, size_t bytes, MemCategory c) noexcept;
// A failure while freeing device memory: the first is logged once as a warning (the op that
// faulted is reported by its own error), later ones are only counted. Never throws.
void mem_note_free_failure(Device d, const char* what) noexcept;
// The first failure noted ("" when none) and how many were noted (tests).
std::string mem_first_free_failure();
int64_t mem_free_failures();
// Host memory for asynchronous copies to and from device `for_device` (pinned for a GPU; plain
// host memory for the CPU or a backend without pinning). Accounted to the CPU.
void* mem_alloc_host(Device for_device, size_t bytes, MemCategory c);
void mem_free_host(Device for_device, void* p, size_t bytes, MemCategory c);

// bytes from src on src_dev to dst on dst_dev (each the host or ctx's device), ordered on ctx's
// stream. Host to host is a memmove: the two may overlap.
void mem_copy(const ExecContext& ctx, void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes);
// A strided copy: rows rows of row_bytes, dst rows dst_pitch bytes apart, src rows src_pitch apart
// (a column block of a row-major matrix; one cudaMemcpy2DAsync on a GPU). No overlap.
void mem_copy_2d(const ExecContext& ctx, void* dst, Device dst_dev, size_t dst_pitch, const void* src, Device src_dev,
                 size_t src_pitch, size_t row_bytes, size_t rows);
// Sets bytes bytes of dst (on dev) to byte / to zero.
void mem_fill(const ExecContext& ctx, void* dst, Device dev, uint8_t byte, size_t bytes);
inline void mem_zero(const ExecContext& ctx, void* dst, Device dev, size_t bytes) {
  mem_fill(ctx, dst, dev, 0, bytes);
}

// Whether this is the poison build (FT_POISON): tests that check the poison itself ask.
bool mem_poison_build();
constexpr uint8_t kPoisonByte = 0xFF;  // as fp32 / bf16 / fp16: a NaN; as int32: -1

// Zeroes host memory in a way the compiler cannot elide.
void secure_zero(void* p, size_t bytes);

// Peak resident set size of this process in bytes (VmHWM), and the current one (VmRSS).
int64_t process_peak_rss_bytes();
int64_t process_rss_bytes();

}  // namespace ft

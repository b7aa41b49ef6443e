// The recording GPU: a Backend (tensor/backend.h) registered as Device::kCUDA in a process that
// asks for an op trace (`fluxtrain plan --step-trace`, its tests) — never in a training run. It
// describes an H200 (name "NVIDIA H200", compute capability 9.0, 141 GB) and computes nothing:
//   - ops: every entry of the op list records the op's name, shapes, bytes, FLOPs and kernel
//     launches (backends/trace/op_costs.h) while recording is on, and does nothing else;
//   - memory: addresses from one reserved, inaccessible range of address space (PROT_NONE,
//     MAP_NORESERVE: nothing is backed, so a 1.1B model's step "fits" on any host, and host code
//     that touches device memory dies with SIGSEGV as it would be wrong on a GPU); fills and
//     copies are recorded as traffic; a device-to-host copy writes zeros into the host buffer (the
//     step's losses and norms read back as 0);
//   - runtime: one device, contexts with their own stream token, every wait a no-op.
//
//   trace::register_recording_gpu();                  // Device::kCUDA is now the recording GPU
//   ExecContext ctx = make_exec_context(Device::kCUDA, 0);
//   ... build the model, warm up ...
//   trace::start_recording();  <one step>;  std::vector<plan::OpRecord> ops = trace::stop_recording();
#pragma once

#include <vector>

#include "plan/op_trace.h"

namespace ft::trace {

// The device name, compute capability and memory it reports.
inline constexpr const char* kRecordingGpuName = "NVIDIA H200";
inline constexpr double kRecordingGpuBytes = 141e9;

// Registers the recording GPU as Device::kCUDA in place of the CUDA plugin (idempotent).
void register_recording_gpu();
// Records every op, fill and copy from now on (clearing what was recorded before).
void start_recording();
// Stops recording; what was recorded, in call order.
std::vector<plan::OpRecord> stop_recording();

}  // namespace ft::trace

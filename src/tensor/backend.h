// Backend: everything one device kind brings, registered once — its ops (kernels/ops.h's OpTable),
// its runtime (contexts, streams: tensor/device_runtime.h), its memory (tensor/memory.h), a
// description, its peak FLOP/s for MFU, what train.precision = "auto" means on it, how many host
// threads a rank of it runs (tensor/host_threads.h) and its communicator transport
// (parallel/comm/device_comm.h). Memory and
// runtime calls here in tensor/ and op dispatch in kernels/ read the same entry.
//
//   const Backend* b = find_backend(Device::kCUDA);          // loads its plugin on first use
//   PrecisionChoice c = b->auto_precision(ctx, threads);       // "auto", once the device is known
//   ThreadChoice t = backend_threads(*b, host_cpus);           // its rule for the host's threads
//
// The CPU's backend is built in (backends/cpu, registered by kernels/op_dispatch.cpp; its runtime
// and memory are the host's). A device kind elsewhere is one folder (src/backends/<kind>) whose
// code calls register_backend() once; when it is a plugin (a shared library loaded on first use,
// like the CUDA backend's libfluxtrain_cuda.so), the binary registers how to load it with one
// register_backend_plugin() line (cli/device_plugins.cpp). A plugin from another build of
// fluxtrain is refused with one line: both sides carry the configure-time build id (FT_BUILD_ID).
#pragma once

#include <atomic>
#include <cstddef>
#include <string>

#include "tensor/device.h"
#include "tensor/device_runtime.h"
#include "tensor/exec_context.h"
#include "tensor/host_threads.h"
#include "tensor/memory.h"
#include "tensor/op_tables.h"
#include "tensor/precision.h"

namespace ft {

struct OpTable;            // kernels/ops.h
struct DeviceCommBackend;  // parallel/comm/device_comm.h

// MFU's denominator on a device: dense FLOP/s at a precision and where the figure comes from.
struct PeakFlops {
  double flops = 0;    // 0: unknown
  std::string source;  // "MFU against this CPU's fastest GEMM, fp32 at 151 GFLOP/s at 1 thread (bf16 81)"
  // Where a measured peak is recorded (the CPU's peak file), "" otherwise: an MFU over 100% then
  // means the record is wrong (measured on a busy machine), which the trainer says once.
  std::string recorded_in;
};

struct Backend {
  Device device = Device::kCPU;
  const OpTable* ops = nullptr;  // one function pointer per op (ops::name dispatches through it)
  DeviceRuntime runtime{};       // contexts and streams; empty for the CPU (built in)
  DeviceMemory memory{};         // allocation, copies, fills; empty for the CPU (built in)
  // The communicators' transport of its device buffers (NCCL for CUDA; parallel.comm chooses it),
  // or null.
  const DeviceCommBackend* comm = nullptr;
  // The lines the trainer logs about what computes ("CPU ...; oneDNN uses avx2", "GEMM ...").
  std::string (*describe)(const ExecContext& ctx) = nullptr;
  // MFU's peak on ctx's device at precision p (the trainer's rank 0 asks once); null: the trainer
  // looks the device's name up in the planner's catalog (plan/gpu_peak.h).
  PeakFlops (*peak_flops)(const ExecContext& ctx, Precision p, int threads) = nullptr;
  // train.precision = "auto" on ctx's device at `threads` host threads.
  PrecisionChoice (*auto_precision)(const ExecContext& ctx, int threads) = nullptr;
  // "auto" before any device exists, without measuring: the config's guess, which the dry run and
  // the planner use (the host's backend is asked: guess_auto_precision below). Null: fp32.
  PrecisionChoice (*guess_precision)() = nullptr;
  // The host threads a rank computing on this device runs with; null: host_share (every thread
  // computes, as on the CPU).
  ThreadChoice (*threads)(const HostCpus& host) = nullptr;
  // false: the device records what it is asked and computes nothing (the recording GPU of the step
  // trace, backends/trace/trace_backend.h), so host work that only makes values for it — drawing
  // the initial weights — is skipped.
  bool computes = true;
};

// b's thread rule applied to what the host offers (host_share when b has none).
ThreadChoice backend_threads(const Backend& b, const HostCpus& host);
// train.precision = "auto" as the host's backend guesses it before the device is known (the
// config's value until the trainer settles it); fp32 in a program without the CPU's backend.
PrecisionChoice guess_auto_precision();

// Makes b the backend of b.device (copied; replaces an earlier one: test stand-ins). Thread-safe;
// registered once at start-up (a static initialiser, a plugin's entry point, a test).
void register_backend(const Backend& b);
// d's backend with its plugin loaded first (register_backend_plugin), or null when none.
const Backend* find_backend(Device d);
// d's backend if one is registered now (loads nothing: e.g. telemetry over every device).
const Backend* registered_backend(Device d);
// "cpu, cuda": the devices this process has ops for.
std::string registered_backend_names();
// Removes d's backend (tests).
void unregister_backend(Device d);
// Registers b for b.device in place of that device's plugin: the plugin is marked as tried (never
// loaded afterwards), so no later find_backend() replaces b. For a backend a command asks for by
// name instead of the device's own (the recording GPU of `fluxtrain plan --step-trace`,
// backends/trace/trace_backend.h).
void register_backend_instead_of_plugin(const Backend& b);

// How a binary loads a device kind's plugin, the first time anything asks about that device: the
// file next to the binary (or $env_var), one entry point (fluxtrain_backend_plugin) which checks
// the build id, the op count and the OpTable size against the binary's and registers the backend.
// When it cannot be loaded, its one-line reason (with a hint) is the device's unavailable reason.
struct BackendPlugin {
  const char* file = nullptr;               // "libfluxtrain_cuda.so"
  const char* env_var = nullptr;            // "FT_CUDA_PLUGIN": a path that replaces the file next to the binary
  size_t op_count = 0, op_table_bytes = 0;  // the binary's kOpCount and sizeof(OpTable)
  // Not empty: this binary was built without the backend; the reason and its hint.
  const char* missing = nullptr;
  const char* missing_hint = nullptr;
  // The hint when the library cannot be opened (e.g. a CUDA library it links is missing).
  const char* open_hint = nullptr;
};
void register_backend_plugin(Device d, const BackendPlugin& plugin);

// The result of loading d's plugin (error "" when there is none or it loaded); runs it once.
struct DeviceLoadResult {
  std::string error;
  std::string hint;
};
const DeviceLoadResult& load_device(Device d);

// The plugin's side (backends/<kind>/plugin_entry.cpp): the one entry point.
#define FT_BACKEND_PLUGIN_ENTRY "fluxtrain_backend_plugin"
extern "C" {
// Null when the backend was registered; else why not (one line). build_id: the binary's FT_BUILD_ID.
using FtBackendPluginEntry = const char* (*)(const char* build_id, size_t op_count, size_t op_table_bytes);
}
// The build id of this binary (configure-time, build_id.h).
const char* build_id();

}  // namespace ft

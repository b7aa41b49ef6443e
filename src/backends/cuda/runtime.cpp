// The CUDA Backend: its DeviceRuntime and DeviceMemory, "auto", and its registration (runtime.h).
#include "backends/cuda/runtime.h"

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>

#include "backends/cuda/context.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_ops.h"
#include "kernels/ops.h"
#include "tensor/backend.h"
#include "tensor/device_runtime.h"
#include "tensor/memory.h"
#include "util/error.h"

namespace ft::cuda {

namespace {

// ---- contexts ------------------------------------------------------------------------------

ExecContext to_exec_context(std::shared_ptr<CudaContext> c) {
  ExecContext e;
  e.device = Device::kCUDA;
  e.device_index = c->device();
  e.stream = c->stream();
  // The cuBLASLt handle and, made on its first SDPA call, the cuDNN one (CudaContext::sdpa: a
  // context that never runs cuDNN attention never creates one) are the CudaContext's.
  e.backend = c.get();
  e.owner = std::move(c);
  return e;
}

// The first context of each device: its stream is the device's memory stream (runtime.h). Made
// by the first make_context on the device, or by the first allocation when that comes first (then
// the next make_context hands it out). Never destroyed: memory may be freed until the process
// ends, and a CUDA object destroyed by a static destructor may outlive the runtime.
constexpr int kMaxDevices = 64;
struct First {
  std::shared_ptr<CudaContext>* ctx = nullptr;
  bool handed_out = false;
};
std::mutex g_mu;
std::array<First, kMaxDevices> g_first{};
int g_process_device = -1;  // the device of the first context: where memory is allocated

int check_index(int index) {
  if (index < 0 || index >= kMaxDevices)
    throw Error(fmt::format("device cuda:{}: out of range", index), "one rank per GPU (CUDA_VISIBLE_DEVICES)");
  return index;
}

// The first context of `device`, made if needed (under g_mu).
std::shared_ptr<CudaContext>& first_context_locked(int device) {
  First& f = g_first[static_cast<size_t>(check_index(device))];
  if (!f.ctx) {
    f.ctx = new std::shared_ptr<CudaContext>(std::make_shared<CudaContext>(device));
    if (g_process_device < 0) g_process_device = device;
  }
  return *f.ctx;
}

// cudaMemGetInfo on device `index`, for the start-up memory check. It needs the device's primary
// context; when this process has made no context yet (the check runs before training, also in
// --nproc's parent, which trains nothing), that context is released again so that it holds no
// device memory while the ranks train.
bool memory_info(int index, DeviceMemoryInfo* out) {
  cudaDeviceProp prop{};
  int previous = 0;
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess || cudaGetDevice(&previous) != cudaSuccess ||
      cudaSetDevice(index) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  size_t free_bytes = 0, total_bytes = 0;
  const bool ok = cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess;
  bool unused = false;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    unused = g_process_device < 0;
  }
  if (unused) cudaDeviceReset();  // this process's primary context on `index`: nothing else uses it yet
  cudaSetDevice(previous);
  cudaGetLastError();
  if (!ok) return false;
  *out = DeviceMemoryInfo{free_bytes, total_bytes, prop.name};
  return true;
}

ExecContext make_context(int index) {
  std::shared_ptr<CudaContext> c;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    First& f = g_first[static_cast<size_t>(check_index(index))];
    if (!f.ctx || !f.handed_out) {
      c = first_context_locked(index);
      f.handed_out = true;
    }
  }
  if (!c) c = std::make_shared<CudaContext>(index);
  return to_exec_context(std::move(c));
}

ExecContext make_side(const ExecContext& ctx) {
  CudaContext& c = context_of(ctx, "make_side_context");
  return to_exec_context(std::make_shared<CudaContext>(c.device(), c.lt_handle()));
}

void wait(const ExecContext& waiter, const ExecContext& on) {
  CudaContext& w = context_of(waiter, "stream_wait");
  CudaContext& o = context_of(on, "stream_wait");
  if (w.stream() == o.stream()) return;
  cudaEvent_t ev = nullptr;
  FT_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "stream_wait", {"device", o.device()});
  const cudaError_t rec = cudaEventRecord(ev, o.stream());
  const cudaError_t wt = rec == cudaSuccess ? cudaStreamWaitEvent(w.stream(), ev, 0) : rec;
  cudaEventDestroy(ev);  // released once the wait has been satisfied
  FT_CUDA_CHECK(wt, "stream_wait", {"device", o.device()});
}

void sync(const ExecContext& ctx) {
  context_of(ctx, "synchronize").synchronize();
}

// Stream timer marks: timing events (tensor/stream_timer.h).
void* record_mark(const ExecContext& ctx, void* mark) {
  CudaContext& c = context_of(ctx, "stream timer");
  auto ev = static_cast<cudaEvent_t>(mark);
  if (!ev) FT_CUDA_CHECK(cudaEventCreate(&ev), "stream timer", {"device", c.device()});
  // Inside a graph capture an event record is a dependency, not a time: the interval is not timed
  // (mark_seconds then finds the event never reached and counts nothing).
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  FT_CUDA_CHECK(cudaStreamIsCapturing(c.stream(), &capturing), "stream timer", {"device", c.device()});
  if (capturing != cudaStreamCaptureStatusNone) return ev;
  FT_CUDA_CHECK(cudaEventRecord(ev, c.stream()), "stream timer", {"device", c.device()});
  return ev;
}

double mark_seconds(void* from, void* to) {
  float ms = 0;
  if (cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(from), static_cast<cudaEvent_t>(to)) != cudaSuccess) {
    cudaGetLastError();  // not reached yet: not the next launch's error
    return -1;
  }
  return ms / 1e3;
}

void free_mark(void* mark) {
  if (mark) cudaEventDestroy(static_cast<cudaEvent_t>(mark));
}

// ---- graphs (tensor/device_graph.h) ---------------------------------------------------------
//
// Thread-local capture: only this thread's calls on the stream are recorded, and only they are
// checked (another thread's checkpoint copies or NCCL polls go on as before). The pool allocates
// on the compute stream (the device's memory stream), so an allocation inside the capture becomes
// a graph allocation node: AutoFreeOnLaunch lets the graph be launched again while one of them is
// still live (the trainer's steady-state step allocates nothing; the flag keeps a replay legal if a
// lazily made buffer slips in). Errors name the call and the device.

void begin_capture(const ExecContext& ctx) {
  CudaContext& c = context_of(ctx, "graph capture");
  FT_CUDA_CHECK(cudaStreamBeginCapture(c.stream(), cudaStreamCaptureModeThreadLocal), "graph capture",
                {"device", c.device()});
}

void* end_capture(const ExecContext& ctx) {
  CudaContext& c = context_of(ctx, "graph capture");
  cudaGraph_t graph = nullptr;
  const cudaError_t e = cudaStreamEndCapture(c.stream(), &graph);
  if (e != cudaSuccess) {
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();  // a broken capture's error is not the next launch's
    throw Error(fmt::format("CUDA graph capture on device cuda:{}: cudaStreamEndCapture: {} ({}): a call inside the "
                            "captured step the graph cannot hold (a host synchronisation or read-back)",
                            c.device(), cudaGetErrorName(e), cudaGetErrorString(e)),
                "set train.cuda_graphs = \"off\"; FT_CUDA_SYNC_CHECK=1 synchronises after every launch and "
                "cannot be captured");
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t i = cudaGraphInstantiateWithFlags(&exec, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch);
  cudaGraphDestroy(graph);
  FT_CUDA_CHECK(i, "graph capture (instantiate)", {"device", c.device()});
  return exec;
}

void replay_graph(void* graph, const ExecContext& ctx) {
  CudaContext& c = context_of(ctx, "graph replay");
  FT_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), c.stream()), "graph replay",
                {"device", c.device()});
}

void free_graph(void* graph) {
  if (graph && cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph)) != cudaSuccess) cudaGetLastError();
}

// ---- memory --------------------------------------------------------------------------------

// The memory stream of the device that holds p (the process's device for a null p).
cudaStream_t memory_stream_of(const void* p) {
  int device = -1;
  cudaPointerAttributes attr{};
  if (p && cudaPointerGetAttributes(&attr, p) == cudaSuccess && attr.type == cudaMemoryTypeDevice)
    device = attr.device;
  else
    cudaGetLastError();
  std::lock_guard<std::mutex> lock(g_mu);
  if (device < 0) {
    if (g_process_device < 0) cudaGetDevice(&g_process_device);
    device = g_process_device;
  }
  return first_context_locked(device)->stream();
}

void* alloc(size_t bytes) {
  int device = 0;
  cudaStream_t stream = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_process_device < 0) cudaGetDevice(&g_process_device);
    device = g_process_device;
    stream = first_context_locked(device)->stream();
  }
  return pool_alloc(device, bytes, stream);  // pool allocations start 256-byte aligned
}

void free_memory(void* p, size_t bytes) {
  // mem_free has zeroed it (fill) on the same stream. Never throws past mem_free, which notes the
  // failure of the fill; this one is noted here (a destructor's path).
  if (!p) return;
  if (const cudaError_t e = cudaFreeAsync(p, memory_stream_of(p)); e != cudaSuccess)
    note_free_error(e, "cudaFreeAsync");
}

cudaStream_t stream_of(const ExecContext& ctx, const void* device_ptr) {
  if (ctx.device == Device::kCUDA && ctx.backend) return context_of(ctx, "memory").stream();
  return memory_stream_of(device_ptr);
}

void copy_2d(const ExecContext& ctx, void* dst, Device dst_dev, size_t dst_pitch, const void* src, Device src_dev,
             size_t src_pitch, size_t row_bytes, size_t rows) {
  const cudaStream_t s = stream_of(ctx, dst_dev == Device::kCUDA ? dst : src);
  FT_CUDA_CHECK(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, row_bytes, rows, cudaMemcpyDefault, s), "memory copy",
                {"row bytes", static_cast<int64_t>(row_bytes)}, {"rows", static_cast<int64_t>(rows)});
  if (dst_dev == Device::kCPU)  // the host reads what it asked for
    FT_CUDA_CHECK(cudaStreamSynchronize(s), "memory copy to the host",
                  {"bytes", static_cast<int64_t>(row_bytes * rows)});
}

void fill(const ExecContext& ctx, void* dst, uint8_t byte, size_t bytes) {
  FT_CUDA_CHECK(cudaMemsetAsync(dst, byte, bytes, stream_of(ctx, dst)), "memory fill",
                {"bytes", static_cast<int64_t>(bytes)});
}

void* host_alloc(size_t bytes) {
  void* p = nullptr;
  if (cudaMallocHost(&p, bytes) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return p;
}

void host_free(void* p, size_t) {
  if (!p) return;
  if (const cudaError_t e = cudaFreeHost(p); e != cudaSuccess) note_free_error(e, "cudaFreeHost");
}

// Device (or managed) memory by the driver's own account; pinned host memory is not.
bool contains(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

// "auto" on this GPU: read from the device (its compute capability).
PrecisionChoice auto_precision(const ExecContext& ctx, int) {
  int major = 0, minor = 0;
  FT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ctx.device_index),
                "compute capability", {"device", ctx.device_index});
  FT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, ctx.device_index),
                "compute capability", {"device", ctx.device_index});
  return gpu_auto_precision("cuda", major, minor);
}

}  // namespace

void register_cuda_backend(const DeviceCommBackend* comm) {
  static std::once_flag once;
  std::call_once(once, [comm] {
    Backend b;
    b.device = Device::kCUDA;
    b.ops = &op_table();
    DeviceRuntime& rt = b.runtime;
    rt.device_count = [] { return device_count(); };
    rt.unavailable_reason = [] { return no_device_reason(); };
    rt.make_context = make_context;
    rt.make_side_context = make_side;
    rt.stream_wait = wait;
    rt.synchronize = sync;
    rt.record_mark = record_mark;
    rt.mark_seconds = mark_seconds;
    rt.free_mark = free_mark;
    rt.memory_info = memory_info;
    rt.begin_capture = begin_capture;
    rt.end_capture = end_capture;
    rt.replay_graph = replay_graph;
    rt.free_graph = free_graph;
    DeviceMemory& m = b.memory;
    m.alloc = alloc;
    m.free = free_memory;
    m.copy_2d = copy_2d;
    m.fill = fill;
    m.host_alloc = host_alloc;
    m.host_free = host_free;
    m.contains = contains;
    b.comm = comm;
    b.auto_precision = auto_precision;  // peak_flops: none, the planner's catalog by the GPU's name
    b.threads = gpu_host_threads;       // guess_precision: none, the host's guess stands until the device is known
    register_backend(b);
  });
}

}  // namespace ft::cuda

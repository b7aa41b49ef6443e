// CudaContext: what every CUDA op runs with — one device and one stream, the cuBLASLt handle
// (shared with the side contexts of the same rank) with this context's own 32 MiB workspace and
// GEMM plans cached per shape, the cuDNN state (handle and SDPA graph cache, made on first use), a
// stream-ordered scratch buffer for op temporaries, and the FT_CUDA_SYNC_CHECK switch.
//
// Model code never sees it: it holds an ExecContext (tensor/exec_context.h) made by the CUDA
// DeviceRuntime (backends/cuda/runtime.cpp), whose `backend` points at the CudaContext and whose
// `owner` keeps it alive; the ops of the OpTable find it there (context_of).
//
//   ExecContext ctx = make_exec_context(Device::kCUDA, 0);   // stream, backend (this CudaContext)
//   ops::rmsnorm_forward(ctx, out, rstd, x, w, N, C, 1e-5f);  // queued on the context's stream
//   synchronize(ctx);
//
// One context per thread of work: ops queue on its stream in call order, and the scratch buffer is
// reused by the next op on the same stream.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tensor/exec_context.h"

namespace ft::cuda {

class GemmCache;  // backends/cuda/gemm.cpp
class SdpaState;  // backends/cuda/sdpa_state.h

// Devices the CUDA runtime sees after CUDA_VISIBLE_DEVICES (0 when there is no driver or no GPU).
int device_count();
// Empty when a device can be used; otherwise why not, e.g. "cudaGetDeviceCount: CUDA driver
// version is insufficient for CUDA runtime version (cudaErrorInsufficientDriver)".
std::string no_device_reason();

// The cuBLASLt handle of one device, shared by a rank's contexts (a handle may be used with any
// stream of its device; each context keeps its own workspace).
struct LtHandle {
  cublasLtHandle_t handle = nullptr;
  explicit LtHandle(int device);
  ~LtHandle();
  LtHandle(const LtHandle&) = delete;
  LtHandle& operator=(const LtHandle&) = delete;
};

class CudaContext {
 public:
  static constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

  // A context with its own stream on `device`; `lt` shares another context's cuBLASLt handle
  // (a side context), null makes one. Throws ft::Error naming the device and the CUDA error.
  explicit CudaContext(int device, std::shared_ptr<LtHandle> lt = nullptr);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cublasLtHandle_t cublaslt() const { return lt_->handle; }
  const std::shared_ptr<LtHandle>& lt_handle() const { return lt_; }
  // The 32 MiB cuBLASLt workspace, allocated on the first GEMM.
  void* cublaslt_workspace();
  GemmCache& gemm_cache() { return *gemm_cache_; }
  // The cuDNN state (handle and graph cache, through the cuDNN sub-plugin), created on first use.
  SdpaState& sdpa();

  // Device memory for one op's temporaries, at least `bytes`, 256-byte aligned. Valid until the
  // next scratch() call; grows (stream-ordered free and allocation from the device's pool, counted
  // as workspace by the MemoryTracker), never shrinks.
  void* scratch(size_t bytes, const char* op);
  size_t scratch_bytes() const { return scratch_bytes_; }
  // A pinned host double for reading back one scalar.
  double* host_scalar() const { return host_scalar_; }

  // FT_CUDA_SYNC_CHECK=1: synchronise and check after every op.
  bool sync_check() const { return sync_check_; }
  void set_sync_check(bool on) { sync_check_ = on; }

  // Waits for the stream; throws ft::Error on an asynchronous fault.
  void synchronize() const;

 private:
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<LtHandle> lt_;
  void* cublaslt_workspace_ = nullptr;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  double* host_scalar_ = nullptr;
  bool sync_check_ = false;
  std::unique_ptr<GemmCache> gemm_cache_;
  std::unique_ptr<SdpaState> sdpa_;
  void release() noexcept;
};

// The CudaContext of a CUDA ExecContext (its `backend`), with the calling thread's current device
// set to the context's; an ft::Error naming the op when ctx is not a CUDA context made by the
// CUDA runtime.
CudaContext& context_of(const ExecContext& ctx, const char* op);

// Stream-ordered device memory from the device's pool (cudaMallocFromPoolAsync on `stream`),
// counted by the MemoryTracker; null when the device is out of memory. Freed zeroed on `stream`.
void* pool_alloc(int device, size_t bytes, cudaStream_t stream);
void pool_free(void* p, size_t bytes, cudaStream_t stream) noexcept;

}  // namespace ft::cuda

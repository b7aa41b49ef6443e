// CudaContext: device, stream, cuBLASLt handle and workspace, scratch (see context.h); the
// stream-ordered pool allocations the scratch, the workspace and the DeviceMemory share.
#include "backends/cuda/context.h"

#include <fmt/format.h>

#include <cstdint>
#include <map>
#include <mutex>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/gemm_plan.h"
#include "backends/cuda/sdpa_state.h"
#include "tensor/memory.h"
#include "util/error.h"
#include "util/strings.h"

namespace ft::cuda {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the error so later calls start clean
    return 0;
  }
  return n;
}

std::string no_device_reason() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return fmt::format("cudaGetDeviceCount: {} ({})", cudaGetErrorString(e), cudaGetErrorName(e));
  }
  if (n == 0) return "cudaGetDeviceCount: no CUDA device is visible (CUDA_VISIBLE_DEVICES)";
  return {};
}

// ---- the pool --------------------------------------------------------------------------------

namespace {

// The device's default memory pool, told to keep freed memory (release threshold: unlimited) so
// that stream-ordered frees and allocations reuse it without returning it to the driver.
cudaMemPool_t device_pool(int device) {
  static std::mutex mu;
  static std::map<int, cudaMemPool_t> pools;
  std::lock_guard<std::mutex> lock(mu);
  auto it = pools.find(device);
  if (it != pools.end()) return it->second;
  cudaMemPool_t pool = nullptr;
  FT_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device), "memory pool", {"device", device});
  uint64_t threshold = UINT64_MAX;
  FT_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold), "memory pool",
                {"device", device});
  pools.emplace(device, pool);
  return pool;
}

}  // namespace

void* pool_alloc(int device, size_t bytes, cudaStream_t stream) {
  void* p = nullptr;
  const cudaError_t e = cudaMallocFromPoolAsync(&p, bytes, device_pool(device), stream);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return nullptr;
  }
  FT_CUDA_CHECK(e, "device memory", {"device", device}, {"bytes", static_cast<int64_t>(bytes)});
  return p;
}

void pool_free(void* p, size_t bytes, cudaStream_t stream) noexcept {
  if (!p) return;
    // Zeroed first (weights and checkpoint staging may be secret), then back to the pool, both in
    // stream order. Errors cannot be thrown from here (destructors call it): the first is noted once
    // (note_free_error); memory that could not be zeroed is not returned to the pool.
#if defined(FT_VGPU_RT_FAULTS)  // tests/vgpu: a free that throws after a sticky fault must be caught
  FT_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream), "pool_free");
#endif
  const cudaError_t e = cudaMemsetAsync(p, 0, bytes, stream);
  if (e != cudaSuccess) return note_free_error(e, "cudaMemsetAsync (zeroing freed memory)");
  if (const cudaError_t f = cudaFreeAsync(p, stream); f != cudaSuccess) note_free_error(f, "cudaFreeAsync");
}

// ---- LtHandle ------------------------------------------------------------------------------

LtHandle::LtHandle(int device) {
  FT_CUBLAS_CHECK(cublasLtCreate(&handle), "CudaContext", {"device", device});
}

LtHandle::~LtHandle() {
  if (handle) cublasLtDestroy(handle);
}

// ---- CudaContext ---------------------------------------------------------------------------

CudaContext::CudaContext(int device, std::shared_ptr<LtHandle> lt)
    : device_(device), lt_(std::move(lt)), sync_check_(sync_check_from_env()) {
  try {
    FT_CUDA_CHECK(cudaSetDevice(device), "CudaContext", {"device", device});
    FT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "CudaContext", {"device", device});
    if (!lt_) lt_ = std::make_shared<LtHandle>(device);
    FT_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host_scalar_), sizeof(double)), "CudaContext",
                  {"device", device});
    gemm_cache_ = std::make_unique<GemmCache>();
  } catch (...) {
    release();
    throw;
  }
}

CudaContext::~CudaContext() {
  release();
}

void CudaContext::release() noexcept {
  // Errors are ignored here: a destructor cannot throw, and a failed device reports at its ops
  // (each is cleared from the thread's last error, so that no later launch check reports it).
  if (stream_ && cudaStreamSynchronize(stream_) != cudaSuccess) cudaGetLastError();
  gemm_cache_.reset();
  sdpa_.reset();
  if (scratch_) {
    pool_free(scratch_, scratch_bytes_, stream_);
    MemoryTracker::global().on_free(Device::kCUDA, MemCategory::kWorkspace, scratch_bytes_);
  }
  if (cublaslt_workspace_) {
    pool_free(cublaslt_workspace_, kCublasWorkspaceBytes, stream_);
    MemoryTracker::global().on_free(Device::kCUDA, MemCategory::kWorkspace, kCublasWorkspaceBytes);
  }
  if (stream_ && cudaStreamSynchronize(stream_) != cudaSuccess) cudaGetLastError();
  if (host_scalar_ && cudaFreeHost(host_scalar_) != cudaSuccess) cudaGetLastError();
  if (stream_ && cudaStreamDestroy(stream_) != cudaSuccess) cudaGetLastError();
  lt_.reset();
  scratch_ = nullptr;
  scratch_bytes_ = 0;
  host_scalar_ = nullptr;
  cublaslt_workspace_ = nullptr;
  stream_ = nullptr;
}

SdpaState& CudaContext::sdpa() {
  if (!sdpa_) sdpa_ = std::make_unique<SdpaState>(*this);
  return *sdpa_;
}

namespace {
void* grow(int device, size_t bytes, cudaStream_t stream, const char* op) {
  void* p = pool_alloc(device, bytes, stream);
  if (!p)
    throw Error(fmt::format("CUDA op {}: out of device memory for {} of workspace on cuda:{} ({})", op,
                            human_bytes(static_cast<double>(bytes)), device,
                            MemoryTracker::global().describe_live(Device::kCUDA)),
                "the GPU is out of memory: lower train.batch_size or train.seq_len, or enable model.recompute; "
                "`fluxtrain plan` estimates the memory a configuration needs");
  MemoryTracker::global().on_alloc(Device::kCUDA, MemCategory::kWorkspace, bytes);
  return p;
}
}  // namespace

void* CudaContext::cublaslt_workspace() {
  if (!cublaslt_workspace_) cublaslt_workspace_ = grow(device_, kCublasWorkspaceBytes, stream_, "matmul");
  return cublaslt_workspace_;
}

void* CudaContext::scratch(size_t bytes, const char* op) {
  if (bytes <= scratch_bytes_) return scratch_;
  const size_t want = (bytes + (size_t{1} << 20) - 1) & ~((size_t{1} << 20) - 1);  // whole MiB
  if (scratch_) {
    pool_free(scratch_, scratch_bytes_, stream_);
    MemoryTracker::global().on_free(Device::kCUDA, MemCategory::kWorkspace, scratch_bytes_);
  }
  scratch_ = nullptr;
  scratch_bytes_ = 0;
  scratch_ = grow(device_, want, stream_, op);
  scratch_bytes_ = want;
  return scratch_;
}

void CudaContext::synchronize() const {
  FT_CUDA_CHECK(cudaStreamSynchronize(stream_), "synchronize", {"device", device_});
}

CudaContext& context_of(const ExecContext& ctx, const char* op) {
  if (ctx.device != Device::kCUDA || ctx.backend == nullptr)
    throw Error(fmt::format("CUDA op {}: the context is not a CUDA context (device {}{})", op, device_name(ctx.device),
                            ctx.backend ? "" : ", no backend state"),
                "make the context with make_exec_context(Device::kCUDA, index)");
  auto& c = *static_cast<CudaContext*>(ctx.backend);
  // Kernels launch on the calling thread's current device: make it the context's.
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current != c.device())
    FT_CUDA_CHECK(cudaSetDevice(c.device()), op, {"device", c.device()});
  return c;
}

}  // namespace ft::cuda

// The CudaContext on the virtual GPU: what the kernels' launchers use of it (the stream, the
// scratch buffer) with no CUDA runtime behind it — the virtual runtime (streams, the pool, events)
// is a later slice of issue 29. The scratch is a registered allocation of exactly the bytes asked
// for (grown, never shrunk, as the real one), so a kernel writing past it is a bounds error.
// The cuBLASLt handle, workspace and GEMM plan cache are the real ones of gemm.cpp over the
// emulated cuBLASLt (cublaslt_sim.cpp). The ops of cuda_ops.h whose CUDA versions are neither .cu
// kernels nor gemm.cpp's (cuDNN attention) are weak stubs here that throw.
#include <cstdlib>
#include <string>

#include "backends/cuda/context.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/gemm_plan.h"
#include "util/error.h"
#include "vgpu/cuda_sim.h"

namespace ft::cuda {

class SdpaState {};

LtHandle::LtHandle(int) {
  if (cublasLtCreate(&handle) != CUBLAS_STATUS_SUCCESS) throw Error("vgpu: cublasLtCreate failed");
}
LtHandle::~LtHandle() {
  if (handle) cublasLtDestroy(handle);
}

CudaContext::CudaContext(int device, std::shared_ptr<LtHandle> lt)
    : device_(device), lt_(std::move(lt)), gemm_cache_(std::make_unique<GemmCache>()) {
  if (!lt_) lt_ = std::make_shared<LtHandle>(device);
}

CudaContext::~CudaContext() {
  release();
}

void CudaContext::release() noexcept {
  if (cublaslt_workspace_) {
    vgpu::unregister_memory(cublaslt_workspace_);
    std::free(cublaslt_workspace_);
  }
  cublaslt_workspace_ = nullptr;
  if (scratch_) {
    vgpu::unregister_memory(scratch_);
    std::free(scratch_);
  }
  scratch_ = nullptr;
  scratch_bytes_ = 0;
}

// Registered but never touched (the emulated algorithm takes no workspace): the pages stay unmapped.
void* CudaContext::cublaslt_workspace() {
  if (!cublaslt_workspace_) {
    cublaslt_workspace_ = std::aligned_alloc(256, kCublasWorkspaceBytes);
    if (!cublaslt_workspace_) throw Error("matmul: out of memory for the cuBLASLt workspace");
    vgpu::register_memory(cublaslt_workspace_, kCublasWorkspaceBytes, "the cuBLASLt workspace");
  }
  return cublaslt_workspace_;
}

void* CudaContext::scratch(size_t bytes, const char* op) {
  if (bytes > scratch_bytes_) {
    release();
    scratch_ = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (!scratch_) throw Error(std::string(op) + ": out of memory for the scratch");
    std::memset(scratch_, 0x7f, bytes);  // no op may rely on the scratch's contents
    vgpu::register_memory(scratch_, bytes, "the context's scratch");
    scratch_bytes_ = bytes;
  }
  return scratch_;
}

void CudaContext::synchronize() const {}

CudaContext& context_of(const ExecContext& ctx, const char* op) {
  if (!ctx.backend) throw Error(std::string(op) + ": not a virtual-GPU context");
  return *static_cast<CudaContext*>(ctx.backend);
}

// Weak: the .cu files' definitions win; the rest throw.
#define FT_OP(name, params, args)                                                             \
  __attribute__((weak)) void name(CudaContext&, FT_OP_UNPAREN params) {                       \
    throw Error(#name ": not on the virtual GPU (cuDNN SDPA cannot be emulated faithfully)"); \
  }
#include "kernels/op_decls.inc"
#undef FT_OP

}  // namespace ft::cuda

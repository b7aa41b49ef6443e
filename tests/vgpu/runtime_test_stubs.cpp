// What the real CUDA context (context.cpp) and op table need that vgpu_runtime_test does not run:
// the ops of cuda_ops.h that are not .cu kernels (cuBLASLt GEMMs, cuDNN attention: they throw),
// the cuBLASLt handle and GEMM descriptors, the cuDNN state. All weak: the cuBLASLt emulation's
// definitions win where it is linked.
#include <string>

#include "backends/cuda/context.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/gemm_plan.h"
#include "backends/cuda/sdpa_state.h"
#include "util/error.h"

__attribute__((weak)) cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  *handle = nullptr;
  return CUBLAS_STATUS_SUCCESS;
}
__attribute__((weak)) cublasStatus_t cublasLtDestroy(cublasLtHandle_t) {
  return CUBLAS_STATUS_SUCCESS;
}
__attribute__((weak)) const char* cublasLtGetStatusString(cublasStatus_t) {
  return "cuBLASLt is not in vgpu_runtime_test";
}

namespace ft::cuda {

__attribute__((weak)) GemmDescriptors::~GemmDescriptors() = default;

struct SdpaState::Impl {};
__attribute__((weak)) SdpaState::SdpaState(CudaContext&) {
  throw Error("cuDNN SDPA is not on the virtual GPU");
}
__attribute__((weak)) SdpaState::~SdpaState() = default;

#define FT_OP(name, params, args)                                                      \
  __attribute__((weak)) void name(CudaContext&, FT_OP_UNPAREN params) {                \
    throw Error(#name ": not in vgpu_runtime_test (cuBLASLt / cuDNN: another slice)"); \
  }
#include "kernels/op_decls.inc"
#undef FT_OP

}  // namespace ft::cuda

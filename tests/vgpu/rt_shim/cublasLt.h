// Test-only <cublasLt.h> for vgpu_runtime_test: the cuBLASLt names context.cpp and gemm_plan.h
// need to compile (handle, descriptors, algo), with weak create/destroy in runtime_test_stubs.cpp.
// The cuBLASLt emulation (issue 29 point 4, shim/cublasLt.h) supersedes it: delete this file and
// the include directory once that shim declares these.
#pragma once
#include "vgpu/cuda_sim.h"
using cublasLtHandle_t = struct cublasLtContext*;
using cublasLtMatmulDesc_t = struct cublasLtMatmulDescOpaque_t*;
using cublasLtMatrixLayout_t = struct cublasLtMatrixLayoutOpaque_t*;
struct cublasLtMatmulAlgo_t {
  uint64_t data[8];
};
enum cublasStatus_t : int { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_SUPPORTED = 15 };
const char* cublasLtGetStatusString(cublasStatus_t s);
cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle);

// Shim: <cublasLt.h> on the virtual GPU — the handle and status types context.h and
// cuda_check.cpp name (cuBLASLt itself comes with a later slice of issue 29).
#pragma once
#include "vgpu/cuda_sim.h"
using cublasLtHandle_t = struct cublasLtContext*;
enum cublasStatus_t : int { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_SUPPORTED = 15 };
const char* cublasLtGetStatusString(cublasStatus_t s);

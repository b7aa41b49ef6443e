// What <nccl.h> includes of the toolkit beyond the runtime, on the virtual GPU: nothing. Its real
// <cuda_fp16.h> would bring the toolkit's vector types beside the executor's (vgpu/cuda_sim.h);
// NCCL's declarations, NcclComm and the stand-in use no half type (fp16/bf16 are ncclDataType_t
// values). <cuda_bf16.h> and <cuda_fp8.h> are not reached: the shim defines no CUDART_VERSION.
#pragma once

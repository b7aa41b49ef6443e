// Shim: <cuda_runtime.h> on the virtual GPU (tests/vgpu) is the executor's header.
#pragma once
#include "vgpu/cuda_sim.h"

// The compute backends fluxtrain has besides the CPU's, made known at start-up: an explicit call
// from main(). The CUDA backend is a plugin (libfluxtrain_cuda.so, next to the binary): this only
// registers how to load it; it is loaded the first time a command asks for a CUDA device
// (train / eval / generate with device "cuda" or "auto", the GPU checks), so commands that never
// do (`--help`, plan, report, ...) map no CUDA library and start as fast as a CPU-only build.
//
//   FT_CUDA_PLUGIN=/path/libfluxtrain_cuda.so   load this file instead of the one next to the binary
//
// When it cannot be loaded, device cuda's unavailable reason says why in one line, with a hint:
//   - "this fluxtrain was built without CUDA"            (configured without nvcc / FT_CUDA=OFF)
//   - "libfluxtrain_cuda.so not found next to the binary (DIR)"   (or FT_CUDA_PLUGIN's file missing)
//   - "loading PATH: <dlerror>"                           (e.g. a CUDA library it needs is missing)
// and once loaded, the driver's own reason when no GPU is usable ("cudaGetDeviceCount: ...").
#pragma once

namespace ft::cli {

// Registers the loader of the CUDA backend (tensor/device_runtime.h, register_device_loader).
// Loads nothing and touches no driver.
void register_backends();

}  // namespace ft::cli

// The compute backends this binary loads as plugins, made known at start-up: an explicit call
// from main(). Each is one registration line (tensor/backend.h, register_backend_plugin): the
// CUDA backend, libfluxtrain_cuda.so next to the binary (backends/cuda/cuda_plugin.h). This only
// registers how to load it; it is loaded the first time a command asks for its device (train /
// eval / generate with device "cuda" or "auto", the GPU checks), so commands that never do
// (`--help`, plan, report, ...) map no CUDA library and start as fast as a CPU-only build.
#pragma once

namespace ft::cli {

// Registers the loader of each plugin backend. Loads nothing and touches no driver.
void register_backends();

}  // namespace ft::cli

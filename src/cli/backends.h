// The compute backends this build has besides the CPU's, made known at start-up: an explicit call
// from main() (a static initialiser in a static library would be dropped by the linker).
#pragma once

namespace ft::cli {

// Registers the CUDA backend (its OpTable, DeviceRuntime and DeviceMemory) in a build with it
// (FT_HAVE_CUDA); nothing otherwise. Touches no driver: train.device = "cuda" asks for a GPU later.
void register_backends();

}  // namespace ft::cli

// The NCCL stand-in (tests/ncclsim/nccl_standin.cpp) on the virtual GPU, in place of its host CUDA
// stand-in (cuda_standin.cpp): its collectives are host functions (cudaLaunchHostFunc) on the
// virtual runtime's streams, in order with the kernels there, and read and write the virtual GPU's
// memory (host-addressable) directly. What the stand-in's hooks (standin.h) did for the host CUDA
// stand-in the runtime does itself (workers, draining, stream-ordered allocation); the one thing
// it cannot see — which buffers a host function touches — comes from check_ordered, called for each
// buffer (its exact bytes) before the collective is queued: a declared access in stream order
// (vgpu::declare_access), so a collective on bytes the compute stream is still writing, with no
// event between, is the runtime's cross-stream race naming the NCCL call and the kernel.
#include <functional>

#include "standin.h"
#include "vgpu/cuda_sim.h"

namespace ncclsim {

bool queue_on_worker(const void*, std::function<void()>) {
  return false;
}
void drain(const void*) {}
void forget_stream(const void*) {}
void adopt_stream(const void*) {}
void set_memory_access(void (*)(const std::function<void()>&)) {}
void touch_memory(const std::function<void()>& f) {
  f();
}
void set_allocation_clock(uint64_t (*)(), uint64_t (*)(const void*)) {}

void check_ordered(const void* stream, const void* p, const char* call, bool write, size_t bytes) {
  if (p == nullptr) return;
  vgpu::declare_access(static_cast<cudaStream_t>(const_cast<void*>(stream)), p, bytes, write, call);
}

}  // namespace ncclsim

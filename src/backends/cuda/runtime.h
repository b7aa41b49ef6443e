// The CUDA backend's registration: its OpTable (cuda_ops.h), its DeviceRuntime (device count and
// why none is usable, contexts with their own streams, side contexts, stream_wait through events,
// synchronize) and its DeviceMemory (a stream-ordered pool, zeroed when freed; pinned host memory)
// made known for Device::kCUDA. No CUDA header here: src/cli calls it at start-up in a build with
// the backend (FT_HAVE_CUDA), explicitly — a static initialiser in a static library would be
// dropped by the linker.
//
//   ft::cuda::register_cuda_backend();       // once, before anything asks for Device::kCUDA
//   ft::device_count(ft::Device::kCUDA);      // 0 here without a driver, with the reason in
//   ft::device_unavailable_reason(ft::Device::kCUDA);
//
// Nothing touches the driver until a count, a context or memory is asked for.
//
// Memory (tensor/memory.h's DeviceMemory for kCUDA):
//   - alloc/free: cudaMallocFromPoolAsync / cudaFreeAsync on the device's default pool (release
//     threshold: unlimited, so freed memory is reused, not returned to the driver), in the order
//     of the device's memory stream: the stream of the first context made on the device (the
//     rank's compute stream; kept for the process's life). A buffer is usable on that stream at
//     once, on a side stream after stream_wait(side, main); work another stream queued on a buffer
//     must be joined into the compute stream (stream_wait(main, side)) before the buffer is freed.
//     Freed memory is zeroed in the same order (mem_free's fill). Out of memory: null, so
//     mem_alloc's error names the category, the request and the tracker's table.
//   - copy_2d: cudaMemcpy2DAsync on the context's stream; a copy to host memory synchronises the
//     stream before returning (the host may read it); a copy from pinned host memory is
//     asynchronous (the host must not change the source until the stream has passed it).
//   - host_alloc/host_free: cudaMallocHost / cudaFreeHost (pinned).
#pragma once

namespace ft {
struct DeviceCommBackend;
}

namespace ft::cuda {

// Registers the backend (its ops, runtime and memory, and `comm` as its communicators' transport:
// NcclComm in the plugin of a build with NCCL) for Device::kCUDA (idempotent).
void register_cuda_backend(const DeviceCommBackend* comm = nullptr);

}  // namespace ft::cuda

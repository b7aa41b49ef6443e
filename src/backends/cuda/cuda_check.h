// Checked calls for the CUDA backend. Every CUDA runtime and cuBLASLt call and every
// kernel launch goes through one of these; a failure throws ft::Error naming the op, its sizes,
// the call and file:line, with a hint.
//
//   FT_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, ctx.stream()), "rmsnorm_backward", {"N", N}, {"C", C});
//   FT_LAUNCH(kernel, grid, block, smem, ctx.stream())(...);
//   FT_CUDA_CHECK_LAUNCH(ctx, "rmsnorm_backward", {"N", N}, {"C", C});
//
// FT_CUDA_CHECK_LAUNCH also synchronises the stream when FT_CUDA_SYNC_CHECK=1 is set, so an
// asynchronous fault (an illegal address, a trap) is reported by the op that caused it rather than
// by a later call.
//
// This header has no fmt and no CUDA headers, so .cu files can include it (fmt's compile-time
// format strings do not compile under nvcc in C++20); messages are formatted in cuda_check.cpp.
#pragma once

#include <cstdint>
#include <initializer_list>

namespace ft::cuda {

class CudaContext;

// One named size of an op, e.g. {"N", 4096}.
struct Dim {
  const char* name;
  int64_t value;
};
using Dims = std::initializer_list<Dim>;

// (cuDNN is called by its sub-plugin only, which reports its errors as text: attention_sdpa.cpp.)
enum class Library : uint8_t { kRuntime, kCublas };

// Throws ft::Error: "<op> (N=.., C=..): <call> failed at <file>:<line>: <library message>".
[[noreturn]] void throw_call_error(Library lib, int status, const char* call, const char* file, int line,
                                   const char* op, Dims dims);

// A CUDA runtime call that failed while freeing device memory (a destructor's path: never throws):
// cleared from the thread's last error and noted once (tensor/memory.h, mem_note_free_failure).
void note_free_error(int status, const char* call) noexcept;

// After a launch: cudaGetLastError, and with FT_CUDA_SYNC_CHECK=1 a stream synchronisation.
void check_launch(const CudaContext& ctx, const char* file, int line, const char* op, Dims dims);

// After a library call that queues work (cuBLASLt, cuDNN SDPA): the synchronisation of
// FT_CUDA_SYNC_CHECK=1 only.
void check_queued(const CudaContext& ctx, const char* file, int line, const char* op, Dims dims);

// A precondition of an op on its sizes: throws ft::Error "<op>: <what> (N=.., C=..)" + hint.
void require(bool ok, const char* op, const char* what, Dims dims, const char* hint = "");

// ft::check_attention_sizes (kernels/attention_checks.h), which .cu files cannot include.
void check_attention(const char* op, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D);
void check_decode(const char* op, int64_t B, int64_t first, int64_t n, int64_t H, int64_t Hkv, int64_t D,
                  int64_t max_T);

// Whether FT_CUDA_SYNC_CHECK is set to a value other than "" or "0" (read once).
bool sync_check_from_env();

}  // namespace ft::cuda

#define FT_CUDA_CALL_CHECK_(lib, call, op, ...)                                                                      \
  do {                                                                                                               \
    const auto ft_status_ = (call);                                                                                  \
    if (static_cast<int>(ft_status_) != 0)                                                                           \
      ::ft::cuda::throw_call_error(lib, static_cast<int>(ft_status_), #call, __FILE__, __LINE__, op, {__VA_ARGS__}); \
  } while (0)

// cudaError_t and cublasStatus_t both use 0 for success.
#define FT_CUDA_CHECK(call, op, ...) FT_CUDA_CALL_CHECK_(::ft::cuda::Library::kRuntime, call, op, __VA_ARGS__)
#define FT_CUBLAS_CHECK(call, op, ...) FT_CUDA_CALL_CHECK_(::ft::cuda::Library::kCublas, call, op, __VA_ARGS__)

#define FT_CUDA_CHECK_LAUNCH(ctx, op, ...) ::ft::cuda::check_launch((ctx), __FILE__, __LINE__, op, {__VA_ARGS__})
#define FT_CUDA_CHECK_QUEUED(ctx, op, ...) ::ft::cuda::check_queued((ctx), __FILE__, __LINE__, op, {__VA_ARGS__})

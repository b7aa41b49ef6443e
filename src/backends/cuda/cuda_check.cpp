// The error side of backends/cuda/cuda_check.h: messages formatted with fmt (host compiler only).
#include "backends/cuda/cuda_check.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/cuda/context.h"
#include "kernels/attention_checks.h"
#include "tensor/memory.h"
#include "util/error.h"

namespace ft::cuda {

namespace {

// "src/backends/cuda/gemm.cpp" rather than the build machine's absolute path.
const char* short_path(const char* file) {
  const char* p = std::strstr(file, "/src/");
  return p ? p + 1 : file;
}

std::string describe(const char* op, Dims dims) {
  std::string s = op;
  if (dims.size() == 0) return s;
  s += " (";
  bool first = true;
  for (const Dim& d : dims) {
    s += fmt::format("{}{}={}", first ? "" : " ", d.name, d.value);
    first = false;
  }
  return s + ")";
}

std::string library_message(Library lib, int status) {
  switch (lib) {
    case Library::kRuntime: {
      auto e = static_cast<cudaError_t>(status);
      return fmt::format("{} ({})", cudaGetErrorString(e), cudaGetErrorName(e));
    }
    case Library::kCublas:
      return fmt::format("{} (cublasStatus_t {})", cublasLtGetStatusString(static_cast<cublasStatus_t>(status)),
                         status);
  }
  return fmt::format("status {}", status);
}

const char* hint_for(Library lib, int status) {
  if (lib == Library::kRuntime) {
    auto e = static_cast<cudaError_t>(status);
    if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice)
      return "no usable NVIDIA GPU or driver here: run on a machine with a GPU, or train with "
             "train.device = \"cpu\"";
    if (e == cudaErrorMemoryAllocation)
      return "the GPU is out of memory: lower train.batch_size or train.seq_len, or enable "
             "model.recompute; `fluxtrain plan` estimates the memory a configuration needs";
  }
  return "run with FT_CUDA_SYNC_CHECK=1 to stop at the first op that fails (kernels run "
         "asynchronously, so an error can surface in a later call)";
}

void throw_if_failed(cudaError_t e, const char* what, const char* file, int line, const char* op, Dims dims) {
  if (e != cudaSuccess) throw_call_error(Library::kRuntime, e, what, file, line, op, dims);
}

}  // namespace

void throw_call_error(Library lib, int status, const char* call, const char* file, int line, const char* op,
                      Dims dims) {
  // This error is reported here: the next launch check must not report it again as its own (a
  // sticky error stays anyway).
  if (lib == Library::kRuntime) cudaGetLastError();
  throw Error(fmt::format("CUDA op {}: {} failed at {}:{}: {}", describe(op, dims), call, short_path(file), line,
                          library_message(lib, status)),
              hint_for(lib, status));
}

void note_free_error(int status, const char* call) noexcept {
  cudaGetLastError();
  try {
    mem_note_free_failure(Device::kCUDA,
                          fmt::format("{} failed: {}", call, library_message(Library::kRuntime, status)).c_str());
  } catch (...) {  // formatting ran out of memory
    mem_note_free_failure(Device::kCUDA, call);
  }
}

void check_launch(const CudaContext& ctx, const char* file, int line, const char* op, Dims dims) {
  throw_if_failed(cudaGetLastError(), "kernel launch", file, line, op, dims);
  if (ctx.sync_check())
    throw_if_failed(cudaStreamSynchronize(ctx.stream()), "cudaStreamSynchronize after the op (FT_CUDA_SYNC_CHECK)",
                    file, line, op, dims);
}

void check_queued(const CudaContext& ctx, const char* file, int line, const char* op, Dims dims) {
  if (ctx.sync_check())
    throw_if_failed(cudaStreamSynchronize(ctx.stream()), "cudaStreamSynchronize after the op (FT_CUDA_SYNC_CHECK)",
                    file, line, op, dims);
}

void require(bool ok, const char* op, const char* what, Dims dims, const char* hint) {
  if (!ok) throw Error(fmt::format("CUDA op {}: {}", describe(op, dims), what), hint);
}

void check_attention(const char* op, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D) {
  check_attention_sizes(op, B, T, H, Hkv, D);
}

void check_decode(const char* op, int64_t B, int64_t first, int64_t n, int64_t H, int64_t Hkv, int64_t D,
                  int64_t max_T) {
  check_decode_sizes(op, B, first, n, H, Hkv, D, max_T);
}

bool sync_check_from_env() {
  static const bool on = [] {
    const char* v = std::getenv("FT_CUDA_SYNC_CHECK");
    return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
  }();
  return on;
}

}  // namespace ft::cuda

// The narrow C interface between the CUDA plugin and its cuDNN sub-plugin libfluxtrain_cudnn.so
// (cuDNN SDPA: cudnn_sdpa.cpp, the only code that includes the cuDNN frontend and links cuDNN).
// The CUDA plugin opens the sub-plugin on the first SDPA call (cudnn_load.h), calls its one entry
// point with its build id, and from then on calls cuDNN only through the table the entry fills in:
// a CUDA plugin without cuDNN on the machine still loads, and bf16/fp16 attention falls back to the
// fp32 kernels (attention_sdpa.cpp).
//
//   FtCudnnApi api{};
//   auto entry = reinterpret_cast<FtCudnnPluginEntry>(dlsym(handle, FT_CUDNN_PLUGIN_ENTRY));
//   if (const char* why = entry(ft::build_id(), sizeof(FtCudnnApi), &api)) ...;   // refused: why
//   void* state = api.create(stream, error, sizeof error);                         // cuDNN handle
//
// C types only (no cuDNN, no ft and no C++ library types cross it): the sub-plugin uses no symbol
// of the executable and may be loaded into any binary that holds the CUDA backend (fluxtrain
// through the plugin, or the test binaries that link the backend statically).
#pragma once

#include <stddef.h>
#include <stdint.h>

extern "C" {

#define FT_CUDNN_PLUGIN_ENTRY "fluxtrain_cudnn_plugin"

// The operands of one SDPA call, by position in FtSdpaCall::operands (device pointers; those a
// direction does not use are null): Q, K, V and O strided views as attention_sdpa.cpp describes,
// Stats the fp32 log-sum-exp (B, H, T).
enum FtSdpaOperand {
  kFtSdpaQ,
  kFtSdpaK,
  kFtSdpaV,
  kFtSdpaO,
  kFtSdpaStats,
  kFtSdpaDO,
  kFtSdpaDQ,
  kFtSdpaDK,
  kFtSdpaDV,
  kFtSdpaOperands
};

// One SDPA graph: causal GQA attention on qkv (B, T, (H + 2 Hkv) D) packed rows.
struct FtSdpaShape {
  int64_t B, T, H, Hkv, D;
  int32_t fp16;      // 0: bf16, 1: fp16
  int32_t backward;  // 0: the forward (writes O and Stats), 1: the backward (writes dQ, dK, dV)
};

// Every function reports a failure as a nonzero return (or null) and one line in error[0..error_bytes).
struct FtCudnnApi {
  // cudnnGetVersion() of the cuDNN the sub-plugin loaded, e.g. 91400.
  size_t (*cudnn_version)(void);
  // The cuDNN state of one CudaContext: a handle made on the calling thread's current device and
  // bound to `stream` (a cudaStream_t), and the graphs built so far. Null when cuDNN fails.
  void* (*create)(void* stream, char* error, size_t error_bytes);
  void (*destroy)(void* state);
  // Builds the graph of `shape` (once: cached, as is a refusal): 0 and its workspace bytes, or
  // nonzero with why cuDNN refused it.
  int (*prepare)(void* state, const FtSdpaShape* shape, int64_t* workspace_bytes, char* error, size_t error_bytes);
  // Queues the prepared graph of `shape` on the state's stream with `workspace` (prepare's bytes).
  int (*execute)(void* state, const FtSdpaShape* shape, void* const* operands, void* workspace, char* error,
                 size_t error_bytes);
};

// The entry point: null and `api` filled in when the sub-plugin comes from the same build (build
// id) with the same table (api_bytes); otherwise why not (a static string).
typedef const char* (*FtCudnnPluginEntry)(const char* build_id, size_t api_bytes, FtCudnnApi* api);

}  // extern "C"

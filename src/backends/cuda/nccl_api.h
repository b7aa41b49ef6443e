// The NCCL functions NcclComm calls, as a table (nccl_api()), so that the CUDA plugin does not
// link libnccl: a process that never makes an NCCL communicator never loads it, and a machine
// without NCCL loads the plugin and trains on one GPU.
//
//   const NcclApi& nccl = nccl_api();   // the first call loads it; CommError when it cannot
//   nccl.AllReduce(send, recv, n, ncclFloat32, ncclSum, comm, stream);
//
// Two providers, one per binary (never both): nccl_load.cpp (the plugin) opens libnccl.so.2 —
// or $FT_NCCL_LIBRARY — with dlopen on the first call and resolves every entry with dlsym; the
// host stand-in of the tests (tests/ncclsim/nccl_api_standin.cpp) points the table at its own
// functions.
#pragma once

#include <nccl.h>

#include <string>

namespace ft {

struct NcclApi {
  decltype(&::ncclGetVersion) GetVersion = nullptr;
  decltype(&::ncclGetErrorString) GetErrorString = nullptr;
  decltype(&::ncclGetLastError) GetLastError = nullptr;
  decltype(&::ncclGetUniqueId) GetUniqueId = nullptr;
  decltype(&::ncclCommInitRankConfig) CommInitRankConfig = nullptr;
  decltype(&::ncclCommGetAsyncError) CommGetAsyncError = nullptr;
  decltype(&::ncclCommFinalize) CommFinalize = nullptr;
  decltype(&::ncclCommDestroy) CommDestroy = nullptr;
  decltype(&::ncclCommAbort) CommAbort = nullptr;
  decltype(&::ncclAllReduce) AllReduce = nullptr;
  decltype(&::ncclReduceScatter) ReduceScatter = nullptr;
  decltype(&::ncclAllGather) AllGather = nullptr;
  decltype(&::ncclBroadcast) Broadcast = nullptr;
  decltype(&::ncclSend) Send = nullptr;
  decltype(&::ncclRecv) Recv = nullptr;
  decltype(&::ncclGroupStart) GroupStart = nullptr;
  decltype(&::ncclGroupEnd) GroupEnd = nullptr;
  std::string library;  // the path it was loaded from (the stand-in: "host stand-in")
};

// The process's table, loaded on the first call (thread-safe). Throws CommError in one line naming
// the library and why (not found, or a function missing), with a hint; every later call retries.
const NcclApi& nccl_api();

// Loads `library` (a file name the dynamic loader resolves, or a path) and resolves every entry;
// throws CommError as nccl_api() does. What nccl_api() calls with $FT_NCCL_LIBRARY, else
// "libnccl.so.2".
NcclApi load_nccl_library(const std::string& library);

}  // namespace ft

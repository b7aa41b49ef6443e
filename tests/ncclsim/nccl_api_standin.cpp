// nccl_api() for the test binaries: the table points at the host stand-in's NCCL functions
// (nccl_standin.cpp) instead of a library opened with dlopen (src/backends/cuda/nccl_load.cpp).
#include "backends/cuda/nccl_api.h"

namespace ft {

const NcclApi& nccl_api() {
  static const NcclApi api = [] {
    NcclApi a;
    a.GetVersion = &ncclGetVersion;
    a.GetErrorString = &ncclGetErrorString;
    a.GetLastError = &ncclGetLastError;
    a.GetUniqueId = &ncclGetUniqueId;
    a.CommInitRankConfig = &ncclCommInitRankConfig;
    a.CommGetAsyncError = &ncclCommGetAsyncError;
    a.CommFinalize = &ncclCommFinalize;
    a.CommDestroy = &ncclCommDestroy;
    a.CommAbort = &ncclCommAbort;
    a.AllReduce = &ncclAllReduce;
    a.ReduceScatter = &ncclReduceScatter;
    a.AllGather = &ncclAllGather;
    a.Broadcast = &ncclBroadcast;
    a.Send = &ncclSend;
    a.Recv = &ncclRecv;
    a.GroupStart = &ncclGroupStart;
    a.GroupEnd = &ncclGroupEnd;
    a.library = "host stand-in (tests/ncclsim)";
    return a;
  }();
  return api;
}

}  // namespace ft

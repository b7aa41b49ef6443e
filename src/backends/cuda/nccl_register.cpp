// Registers NcclComm as parallel.comm's device transport (device_comm.h) when its image is loaded:
// the CUDA plugin libfluxtrain_cuda.so (with the CUDA runtime and NCCL; its static initialisers
// run when fluxtrain loads it) or the stand-in test binaries, with FT_NCCL_STANDIN=1:
// fluxtrain-ncclsim, where "device" buffers are host memory, and fluxtrain-devemu-nccl, where they
// are the host-emulated GPU's (tests/ncclemu).
#include "backends/cuda/nccl_comm.h"
#include "parallel/comm/device_comm.h"

#ifndef FT_NCCL_STANDIN
#define FT_NCCL_STANDIN 0
#endif

namespace {

const bool g_registered = [] {
  ft::register_device_comm(
      {FT_NCCL_STANDIN ? "NCCL (host stand-in: tests only)" : "NCCL", &ft::make_nccl_comm, FT_NCCL_STANDIN != 0});
  return true;
}();

}  // namespace

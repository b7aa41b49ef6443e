# NCCL and the CUDA runtime, for NcclComm (src/backends/cuda/nccl_comm.cpp).
#
# FT_NCCL: AUTO (default) builds NcclComm when the CUDA toolkit's runtime and NCCL (headers and
# libraries) are found, OFF never, ON requires them. When built, the CUDA plugin carries NcclComm
# with the CUDA runtime and opens libnccl when a communicator is first made (nccl_api.h; the
# library found here, FT_NCCL_LIBRARY, is only nccl_load_test's), and the test binary
# `fluxtrain-devemu-nccl` links the same NcclComm against the host stand-in of both (tests/ncclsim)
# instead, on the host-emulated GPU's device buffers (tests/ncclemu). A machine without the toolkit
# builds and tests everything else. Sets FT_HAVE_NCCL and FT_NCCL_INCLUDE_DIRS.
# (The CUDA backend detects the toolkit too — FT_CUDA — and this file follows it once both are on
# main.)
set(FT_NCCL "AUTO" CACHE STRING "build NcclComm: AUTO (when the CUDA toolkit and NCCL are found), ON, OFF")
set(FT_HAVE_NCCL OFF)
if(NOT FT_NCCL STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  find_path(FT_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  find_library(FT_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
  if(CUDAToolkit_FOUND AND TARGET CUDA::cudart AND FT_NCCL_INCLUDE_DIR AND FT_NCCL_LIBRARY)
    set(FT_HAVE_NCCL ON)
    set(FT_NCCL_INCLUDE_DIRS ${FT_NCCL_INCLUDE_DIR} ${CUDAToolkit_INCLUDE_DIRS})
    message(STATUS "NCCL: ${FT_NCCL_LIBRARY} (CUDA ${CUDAToolkit_VERSION}); NcclComm and fluxtrain-devemu-nccl are built")
  elseif(FT_NCCL STREQUAL "ON")
    message(FATAL_ERROR "FT_NCCL=ON but the CUDA toolkit (${CUDAToolkit_FOUND}) or NCCL (header: ${FT_NCCL_INCLUDE_DIR}, "
                        "library: ${FT_NCCL_LIBRARY}) was not found")
  else()
    message(STATUS "NCCL: not found (CUDA toolkit: ${CUDAToolkit_FOUND}); parallel.comm = \"nccl\" is unavailable")
  endif()
endif()

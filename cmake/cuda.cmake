# The CUDA backend's build switch (see docs/kernels.md, "CUDA backend").
#
#   -DFT_CUDA=AUTO   (default) build it when a CUDA compiler (nvcc) is found
#   -DFT_CUDA=ON     require it (configure fails without the toolkit)
#   -DFT_CUDA=OFF    CPU only
#
# Sets FT_CUDA_ENABLED (ON/OFF) and, when OFF, FT_CUDA_SKIP_REASON (printed by the skipped CUDA
# tests). With CUDA on: CMAKE_CUDA_ARCHITECTURES defaults to 80;90 (plus 100 when the toolkit
# knows sm_100), nvcc runs with --Werror all-warnings and ptxas reports spills and local memory
# (as errors, under --Werror). cuDNN SDPA is built when cuDNN and the frontend headers (fetched by
# scripts/fetch-cudnn-frontend.sh into .deps/) are available: FT_CUDNN_SDPA.

set(FT_CUDA "AUTO" CACHE STRING "build the CUDA backend: AUTO (when nvcc is found), ON or OFF")
set_property(CACHE FT_CUDA PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${FT_CUDA}" FT_CUDA)
if(NOT FT_CUDA MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "FT_CUDA=${FT_CUDA}: expected AUTO, ON or OFF")
endif()

set(FT_CUDA_ENABLED OFF)
set(FT_CUDA_SKIP_REASON "")
set(FT_CUDNN_SDPA OFF)

if(FT_CUDA STREQUAL "OFF")
  set(FT_CUDA_SKIP_REASON "the build was configured with -DFT_CUDA=OFF")
else()
  include(CheckLanguage)
  check_language(CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    set(FT_CUDA_SKIP_REASON "no CUDA compiler (nvcc) was found when the build was configured")
    if(FT_CUDA STREQUAL "ON")
      message(FATAL_ERROR "FT_CUDA=ON but no CUDA compiler (nvcc) was found: install the CUDA toolkit, put nvcc "
                          "on PATH (or set CUDACXX), or configure with -DFT_CUDA=AUTO or OFF")
    endif()
  endif()
endif()

if(CMAKE_CUDA_COMPILER)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    execute_process(COMMAND ${CMAKE_CUDA_COMPILER} --list-gpu-arch OUTPUT_VARIABLE ft_nvcc_archs ERROR_QUIET)
    set(CMAKE_CUDA_ARCHITECTURES 80 90)
    if(ft_nvcc_archs MATCHES "compute_100")
      list(APPEND CMAKE_CUDA_ARCHITECTURES 100)
    endif()
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  set(FT_CUDA_ENABLED ON)
  # C++20 for CUDA as for C++ (CUDA_STANDARD follows CXX_STANDARD). CMake 3.25 does not know the
  # flag for nvcc 13, so it is named here.
  if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set(CMAKE_CUDA_EXTENSIONS OFF)
  if(FT_CCACHE AND NOT CMAKE_CUDA_COMPILER_LAUNCHER)
    set(CMAKE_CUDA_COMPILER_LAUNCHER ${FT_CCACHE})
  endif()
  set(FT_CUDA_FLAGS "SHELL:--Werror all-warnings" "SHELL:--ptxas-options=-warn-spills,-warn-lmem-usage"
                    "SHELL:--compiler-options=-Wall,-Wextra,-Wno-unused-parameter")
  message(STATUS "CUDA backend: nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}")

  # cuDNN (library + header) and the frontend headers for SDPA.
  find_library(FT_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
  find_path(FT_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  if(FT_CUDNN_LIBRARY AND FT_CUDNN_INCLUDE_DIR)
    execute_process(COMMAND ${PROJECT_SOURCE_DIR}/scripts/fetch-cudnn-frontend.sh
                    OUTPUT_VARIABLE FT_CUDNN_FRONTEND_INCLUDE OUTPUT_STRIP_TRAILING_WHITESPACE
                    ERROR_VARIABLE ft_fetch_err RESULT_VARIABLE ft_fetch_rc)
    if(ft_fetch_rc EQUAL 0 AND EXISTS "${FT_CUDNN_FRONTEND_INCLUDE}/cudnn_frontend.h")
      set(FT_CUDNN_SDPA ON)
      message(STATUS "CUDA backend: cuDNN ${FT_CUDNN_LIBRARY}, frontend ${FT_CUDNN_FRONTEND_INCLUDE}")
    else()
      message(WARNING "cuDNN SDPA is not built (bf16 attention falls back to the fp32 kernels): ${ft_fetch_err}")
    endif()
  else()
    message(WARNING "cuDNN not found next to the CUDA toolkit: cuDNN SDPA is not built (bf16 attention falls back "
                    "to the fp32 kernels)")
  endif()
else()
  message(STATUS "CUDA backend: off (${FT_CUDA_SKIP_REASON})")
endif()

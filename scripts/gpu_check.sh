#!/usr/bin/env bash
# The CUDA backend's checks on a lent GPU machine: one call, at most 8 minutes on an H200.
#
# On the development machine, once before the call (builds build-gpu/: host code for x86-64-v3,
# device code for sm_90; packs kernels_cuda_test, fluxtrain with its CUDA plugin
# libfluxtrain_cuda.so (loaded from beside the binary) and the plugin's cuDNN sub-plugin
# libfluxtrain_cudnn.so (loaded from beside the plugin on the first SDPA call), and the shared
# libraries the GPU machine may lack — the CUDA runtime, oneDNN, MPI, ICU, ... ; not glibc, the C++
# runtime, the driver, cuBLAS, cuDNN, NVRTC or NCCL — as
# .gpu-pack/pack.tar.xz, ignored by git, under the 64 MiB a call may carry; the GPU machine unpacks
# it on the first run):
#   scripts/gpu_check.sh --pack
#   scripts/gpu_check.sh --pack-from BUILD DIR   # the same from an existing build, into DIR (CI)
#   XZ_OPT=-0 scripts/gpu_check.sh --pack ...      # xz's own variable (tar -J passes it on): the
#                                                  # compression level; -6, xz's default, the smallest
# On the GPU machine (the device tool: run with carry [".gpu-pack"] and timeout_s 540):
#   scripts/gpu_check.sh [--out DIR]          # DIR: $OUT there, else build/gpu_check
#   scripts/gpu_check.sh --stages 3           # one stage alone (each finds the GPU and libraries itself)
# The device tool sends the checkout its session started in (the main checkout, also for a helper
# working in another worktree): pack in that checkout, with the code to check merged into it.
#
# Stages (scripts/gpu_check.py runs them in the order 0 1 2 4 3; each rewrites DIR/gpu_check.json, a
# table comes last). Each has a cap on an H200 and each call inside it a limit of its own; the caps
# add up to 440 s of the 470 s budget, so a 15-minute lease (less a machine start of up to 4) still
# has room to re-run the largest stage alone (--stages N):
#   0  30 s  environment: driver, GPU, CUDA / cuBLASLt / cuDNN / PyTorch versions, missing libraries,
#      and the path each library the plugin opens resolves to (linked, and NCCL's opened on demand)
#   1  120 s kernels_cuda_test (75 s): every row of the op harness (tests/ops: every op of
#      op_decls.inc on odd shapes) through the CUDA OpTable against ft::ref, each run twice and
#      compared bitwise, the backward rows against finite differences; device memory and streams;
#      FT_CUDA_SYNC_CHECK naming a faulting op. Then in calls of their own: cuDNN SDPA bf16/fp16
#      (25 s; head dims 64 and 128 must run on cuDNN, a refusal of another is a warning) and our
#      bf16/fp32 GEMM rate (20 s)
#   2  80 s  llama-20m, 30 steps on the GPU against tests/cuda/golden/llama-20m.json (fp32, bf16: 40 s each)
#   4  40 s  stage 2's fp32 run with parallel.comm = "nccl": a one-rank NCCL communicator per group
#      (one GPU: more ranks than GPUs is refused by NCCL)
#   3  170 s a 1.1B LLaMA in bf16: fluxtrain tokens/s, MFU, peak memory (60 s; the run is also the
#      probe of the trainer: a build that refuses train.device = "cuda" reports n/a) beside PyTorch
#      eager (35 s) and torch.compile (75 s) (bench/torch_gpu_train.py) on the same GPU
# Without a GPU every stage skips with the reason. --cpu-dry-run [--steps N] exercises every stage
# against the CPU build here (no caps): stage 1's tests skip, stage 2 compares the golden runs' first
# N steps, stage 3 asks the trainer for "cuda" (refused) then trains the tiny shape on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."

# pack BUILD PACK DESCRIPTION: kernels_cuda_test, fluxtrain, its plugin and the plugin's cuDNN
# sub-plugin (where the build has cuDNN SDPA) from BUILD, stripped, all in one directory (the
# sub-plugin is found beside the object that opens it), and in PACK/lib the shared libraries they
# link that the GPU machine is not expected to have, as PACK/pack.tar.xz and PACK/pack.json. Left
# out: glibc and its family (the GPU machine's own, which may be newer, must be used: a pack's
# libresolv or libm ahead of it breaks the system's tools), the C++ runtime, and the CUDA libraries
# — cuBLAS, cuDNN, NVRTC (which only the sub-plugin links), the driver, and NCCL, which the plugin
# opens only when a communicator is made (the toolkit and PyTorch's wheels bring them; stage 0 says
# where each is found). The CUDA runtime libcudart.so.13 is carried (0.7 MB): the backend and the
# sub-plugin share it (src/backends/cuda/CMakeLists.txt), and it must be the toolkit's they were
# built with. lib/ is put on the path of fluxtrain and kernels_cuda_test only, never of Python
# (gpu_check.py).
pack() {
  local build=$1 pack=$2 what=$3 stage bin lib bins
  for bin in "$build/tests/cuda/kernels_cuda_test" "$build/fluxtrain" "$build/libfluxtrain_cuda.so"; do
    [ -f "$bin" ] || { echo "error: $bin is missing; hint: build it first (cmake --build $build)" >&2; return 1; }
  done
  rm -rf "$pack"
  stage=$(mktemp -d)
  mkdir -p "$stage/lib"
  bins="kernels_cuda_test fluxtrain libfluxtrain_cuda.so"
  cp "$build/tests/cuda/kernels_cuda_test" "$build/fluxtrain" "$build/libfluxtrain_cuda.so" "$stage/"
  if [ -f "$build/libfluxtrain_cudnn.so" ]; then
    cp "$build/libfluxtrain_cudnn.so" "$stage/"
    bins="$bins libfluxtrain_cudnn.so"
  fi
  # (fluxtrain keeps its exported symbols: strip leaves the dynamic symbol table the plugin binds to.)
  for bin in $bins; do strip "$stage/$bin"; done
  for bin in $bins; do
    ldd "$stage/$bin" | awk '/=>/ && $3 ~ /^\// {print $3}' | while read -r lib; do
      case "$(basename "$lib")" in
        libc.so*|libm.so*|libmvec.so*|libdl.so*|librt.so*|libpthread.so*|libresolv.so*|libnss_*|libnsl.so*) ;;
        libutil.so*|libanl.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
        libcublas*|libcudnn*|libnvrtc*|libcuda.so*|libnccl*) ;;
        *) cp -Ln "$lib" "$stage/lib/" ;;
      esac
    done
  done
  mkdir -p "$pack"
  tar -C "$stage" -cJf "$pack/pack.tar.xz" .
  local rc=0
  /usr/bin/python3 - "$pack" "$stage" "$(git rev-parse HEAD)" "$(git status --porcelain | wc -l)" "$what" << 'PY' || rc=$?
import datetime, json, os, sys
pack, stage, commit, dirty, what = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
files = {}
for root, _, names in os.walk(stage):
    for n in names:
        p = os.path.join(root, n)
        files[os.path.relpath(p, stage)] = os.path.getsize(p)
total = os.path.getsize(os.path.join(pack, "pack.tar.xz"))
json.dump({"commit": commit, "uncommitted_changes": dirty, "date": datetime.datetime.now().isoformat(timespec="seconds"),
           "build": what, "files": files, "carried_bytes": total},
          open(os.path.join(pack, "pack.json"), "w"), indent=1)
print(f"gpu_check: {pack}/pack.tar.xz: {len(files)} files, {sum(files.values()) / 2**20:.1f} MiB unpacked, "
      f"{total / 2**20:.1f} MiB to carry")
if total > 60 * 2**20:
    sys.exit("error: the pack is over 60 MiB; hint: the device tool carries at most 64 MiB per call: see which "
             f"files of {pack}/pack.json are large")
PY
  rm -rf "$stage"
  return $rc
}

if [ "${1:-}" = "--pack" ]; then
  BUILD=build-gpu
  echo "gpu_check: building $BUILD (FT_ARCH=x86-64-v3, sm_90) ..." >&2
  mkdir -p "$BUILD"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFT_ARCH=x86-64-v3 -DFT_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 > "$BUILD/configure.log" 2>&1 || { cat "$BUILD/configure.log" >&2; exit 1; }
  nice -n 5 cmake --build "$BUILD" --target kernels_cuda_test fluxtrain fluxtrain_cuda -j "${JOBS:-2}"
  pack "$BUILD" .gpu-pack "build-gpu: -DFT_ARCH=x86-64-v3 -DFT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90"
  exit $?
fi
# --pack-from BUILD DIR: the same pack of an existing build, into DIR (tests/cuda: gpu_pack_test).
if [ "${1:-}" = "--pack-from" ]; then
  [ $# -eq 3 ] || { echo "error: usage: gpu_check.sh --pack-from BUILD_DIR PACK_DIR" >&2; exit 2; }
  pack "$2" "$3" "$2 (an existing build)"
  exit $?
fi

# The GPU machine: unpack the pack once (the binaries and lib/ beside pack.json).
if [ -f .gpu-pack/pack.tar.xz ] && [ ! -x .gpu-pack/kernels_cuda_test ]; then
  tar -C .gpu-pack -xJf .gpu-pack/pack.tar.xz
fi
exec python3 scripts/gpu_check.py "$@"

#!/usr/bin/env bash
# The CUDA backend's checks on a lent GPU machine: one call, at most 8 minutes on an H200.
#
# On the development machine, once before the call (builds build-gpu/: host code for x86-64-v3,
# device code for sm_90; copies what the GPU machine lacks into .gpu-pack/, ignored by git, under
# the 64 MiB a call may carry):
#   scripts/gpu_check.sh --pack
# On the GPU machine (the device tool: run with carry [".gpu-pack"] and timeout_s 540):
#   scripts/gpu_check.sh [--out DIR]          # DIR: $OUT there, else build/gpu_check
# The device tool sends the checkout its session started in (the main checkout, also for a helper
# working in another worktree): pack in that checkout, with the code to check merged into it.
#
# Stages (scripts/gpu_check.py runs them; each rewrites DIR/gpu_check.json, a table comes last):
#   0  environment: driver, GPU, CUDA / cuBLASLt / cuDNN / PyTorch versions, missing libraries
#   1  kernels_cuda_test: every CUDA op against ft::ref on odd shapes (fp32, bf16, fp16), each run
#      twice and compared bitwise; FT_CUDA_SYNC_CHECK naming a faulting op; our bf16/fp32 GEMM rate
#   2  llama-20m, 30 steps on the GPU against tests/cuda/golden/llama-20m.json (fp32, bf16)
#   3  a 1.1B LLaMA in bf16: fluxtrain tokens/s, MFU, peak memory beside PyTorch eager and
#      torch.compile (bench/torch_gpu_train.py) on the same GPU in the same run
# Stages 2 and 3's fluxtrain runs need the trainer on CUDA (train.device = "cuda"); until a build
# has it they report "not available in this build". Without a GPU every stage skips with the reason
# (that is the dry run this script gets on the development machine).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--pack" ]; then
  PACK=.gpu-pack
  BUILD=build-gpu
  echo "gpu_check: building $BUILD (FT_ARCH=x86-64-v3, sm_90) ..." >&2
  mkdir -p "$BUILD"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFT_ARCH=x86-64-v3 -DFT_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 > "$BUILD/configure.log" 2>&1 || { cat "$BUILD/configure.log" >&2; exit 1; }
  nice -n 5 cmake --build "$BUILD" --target kernels_cuda_test -j "${JOBS:-2}"
  rm -rf "$PACK"
  mkdir -p "$PACK/lib"
  cp "$BUILD/tests/cuda/kernels_cuda_test" "$PACK/"
  # Shared libraries the GPU machine is not expected to have: all but glibc, the C++ runtime and
  # the CUDA libraries (its CUDA toolkit and PyTorch's wheels bring those; stage 0 checks).
  ldd "$PACK/kernels_cuda_test" | awk '/=>/ {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
      libcublas*|libcudnn*|libnvrtc*|libcuda.so*|libcudart*) ;;
      *) cp -L "$lib" "$PACK/lib/" ;;
    esac
  done
  /usr/bin/python3 - "$PACK" "$(git rev-parse HEAD)" "$(git status --porcelain | wc -l)" << 'PY'
import datetime, json, os, sys
pack, commit, dirty = sys.argv[1], sys.argv[2], int(sys.argv[3])
files = {}
for root, _, names in os.walk(pack):
    for n in names:
        p = os.path.join(root, n)
        files[os.path.relpath(p, pack)] = os.path.getsize(p)
total = sum(files.values())
json.dump({"commit": commit, "uncommitted_changes": dirty, "date": datetime.datetime.now().isoformat(timespec="seconds"),
           "build": "build-gpu: -DFT_ARCH=x86-64-v3 -DFT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90", "files": files},
          open(os.path.join(pack, "pack.json"), "w"), indent=1)
print(f"gpu_check: {pack}: {len(files)} files, {total / 2**20:.1f} MiB")
if total > 60 * 2**20:
    sys.exit("error: the pack is over 60 MiB; the device tool carries at most 64 MiB per call")
PY
  exit 0
fi

exec python3 scripts/gpu_check.py "$@"

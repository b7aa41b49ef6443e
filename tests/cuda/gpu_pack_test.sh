#!/usr/bin/env bash
# The pack scripts/gpu_check.sh carries to a GPU machine, made from this build (--pack-from): under
# 60 MiB; none of the libraries the GPU machine must bring itself (glibc and its family, the C++
# runtime, the driver, cuBLAS, cuDNN, NVRTC, NCCL), but the CUDA runtime the plugin and its cuDNN
# sub-plugin share; a plugin that links neither NCCL nor cuDNN (nor NVRTC) — the build's, by ldd,
# and the packed one — and the cuDNN sub-plugin beside it (where the build has one), linking cuDNN
# and the same CUDA runtime; and the packed
# fluxtrain runs from the pack alone — an environment whose LD_LIBRARY_PATH is only the pack's lib/:
# --help, 3 steps of configs/tiny.toml on the CPU, and train.device = "cuda" ending with the same
# last line (the driver's reason: no GPU here) and exit code as this build's fluxtrain.
# usage: gpu_pack_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# xz -0 (XZ_OPT, which gpu_check.sh's pack honours): the same files in a pack ~20% larger than the
# default -6 makes (32 MiB against 27), compressed with ~6x less CPU (15 s against 94 on CI's kind of
# core); the 60 MiB limit below holds the more for -6's smaller pack.
XZ_OPT=-0 "$src/scripts/gpu_check.sh" --pack-from "$build" "$out/pack"
pack=$out/pack
tar -C "$pack" -xJf "$pack/pack.tar.xz"
bytes=$(stat -c %s "$pack/pack.tar.xz")
[ "$bytes" -lt $((60 * 1024 * 1024)) ] || fail "the pack is $bytes bytes (limit 60 MiB)"
echo "pack: $((bytes / 1024)) KiB to carry; lib/: $(ls "$pack/lib" | tr '\n' ' ')"
excluded='^(libc|libm|libmvec|libdl|librt|libpthread|libresolv|libnss_[a-z]+|libnsl|libutil|libanl|ld-linux.*|libstdc\+\+|libgcc_s|libcublas(Lt)?|libcudnn.*|libnvrtc.*|libcuda|libnccl)\.so'
if bad=$(ls "$pack/lib" | grep -E "$excluded"); then fail "the pack carries $bad"; fi
# The plugin loads without NCCL and cuDNN: neither it nor anything it links needs them (ldd: the
# whole tree of the build's plugin; readelf: the packed one's own list).
if bad=$(ldd "$build/libfluxtrain_cuda.so" | grep -oE 'lib(nccl|cudnn|nvrtc)[^ ]*'); then
  fail "ldd $build/libfluxtrain_cuda.so lists $(echo $bad)"
fi
if bad=$(readelf -d "$pack/libfluxtrain_cuda.so" | grep -oE 'NEEDED.*lib(nccl|cudnn|nvrtc)[^]]*'); then
  fail "the packed plugin links $bad"
fi
# One CUDA runtime: the plugin's, shared (carried), and the sub-plugin's the same.
cudart=$(readelf -d "$pack/libfluxtrain_cuda.so" | grep -oE 'libcudart\.so\.[0-9]+' || true)
[ -n "$cudart" ] || fail "the plugin does not link the shared CUDA runtime (libcudart.so.N)"
[ -f "$pack/lib/$cudart" ] || fail "the pack does not carry $cudart"
if [ -f "$build/libfluxtrain_cudnn.so" ]; then
  [ -f "$pack/libfluxtrain_cudnn.so" ] || fail "the pack does not carry libfluxtrain_cudnn.so beside the plugin"
  needed=$(readelf -d "$pack/libfluxtrain_cudnn.so" | grep NEEDED)
  echo "$needed" | grep -q 'libcudnn\.so' || fail "the cuDNN sub-plugin does not link cuDNN"
  echo "$needed" | grep -q "\[$cudart\]" || fail "the cuDNN sub-plugin does not link the plugin's $cudart"
  if echo "$needed" | grep -q 'libfluxtrain_cuda'; then fail "the cuDNN sub-plugin links the plugin"; fi
  echo "cuDNN sub-plugin: libfluxtrain_cudnn.so, links cuDNN and $cudart"
fi

run_packed() { env -i PATH=/usr/bin:/bin HOME="$out" LD_LIBRARY_PATH="$pack/lib" "$pack/fluxtrain" "$@"; }
run_packed --help > "$out/help.txt" 2>&1 || fail "packed fluxtrain --help: $(tail -1 "$out/help.txt")"
grep -q "train" "$out/help.txt" || fail "packed fluxtrain --help names no train command"
run_packed train --config "$src/configs/tiny.toml" --set train.steps=3 --run-dir "$out/run" > "$out/tiny.txt" 2>&1 ||
  fail "packed fluxtrain, 3 tiny steps: $(tail -1 "$out/tiny.txt")"
steps=$(grep -c '"loss"' "$out/run/metrics.jsonl" || true)
[ "$steps" -eq 3 ] || fail "3 tiny steps logged $steps rows"
echo "tiny: 3 steps, last: $(tail -1 "$out/run/metrics.jsonl" | cut -c1-100)"

set +e
run_packed train --config "$src/configs/tiny.toml" --set train.steps=1 --set 'train.device="cuda"' \
  --run-dir "$out/cuda" > "$out/cuda.txt" 2>&1
packed_rc=$?
"$build/fluxtrain" train --config "$src/configs/tiny.toml" --set train.steps=1 --set 'train.device="cuda"' \
  --run-dir "$out/cuda-build" > "$out/cuda-build.txt" 2>&1
build_rc=$?
set -e
packed_err=$(grep '^error:' "$out/cuda.txt" | tail -1)
build_err=$(grep '^error:' "$out/cuda-build.txt" | tail -1)
echo "train.device = \"cuda\": exit $packed_rc: $packed_err"
[ "$packed_rc" -eq "$build_rc" ] || fail "exit $packed_rc from the pack, $build_rc from the build"
[ "$packed_rc" -ne 0 ] || fail "train.device = \"cuda\" succeeded without a GPU"
[ "$packed_err" = "$build_err" ] || fail "the pack says '$packed_err', the build '$build_err'"
echo "ok"

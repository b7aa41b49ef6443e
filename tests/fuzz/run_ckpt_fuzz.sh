#!/usr/bin/env bash
# Builds the libFuzzer targets for the checkpoint manifest and safetensors readers with clang
# (ASan + UBSan) and runs each for a few seconds, seeded with files the real binary writes.
# The same mechanism as run_fuzz.sh (the data readers).
#
#   tests/fuzz/run_ckpt_fuzz.sh BUILD_DIR [SECONDS]      # CTest: ckpt_fuzz
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "$1" && pwd)"
seconds="${2:-10}"
work="$build/fuzz_ckpt"
me=run_ckpt_fuzz
. "$root/tests/fuzz/fuzz_lib.sh"
objs=()
fuzz_objects "$root/src/ckpt/ckpt_manifest.cpp" "$root/src/ckpt/pieces.cpp" "$root/src/ckpt/crypto.cpp" \
             "$root/src/util/safetensors.cpp" "$root/src/util/checksum.cpp" "$root/src/tensor/tensor.cpp" \
             "$root/src/tensor/memory.cpp" "$root/src/tensor/dtype.cpp" "$root/src/tensor/f16_convert.cpp" \
             "$root/src/tensor/backend.cpp" "$root/src/tensor/host_threads.cpp" "$root/src/util/error.cpp" \
             "$root/src/util/fs.cpp" "$root/src/util/log.cpp" "$root/src/util/strings.cpp"
for t in ckpt_manifest safetensors; do fuzz_target $t "${objs[@]}" -- $(pkg-config --libs fmt libxxhash libcrypto) -ldl; done

# Seeds: manifests of a one-process checkpoint and of its dp2 x pp2 reshard (many pieces), and a
# small safetensors file.
seed="$work/seed"
if [ ! -f "$seed/dp2pp2/manifest.json" ]; then
  rm -rf "$seed"
  "$build/fluxtrain" train --config "$root/configs/tiny.toml" --run-dir "$seed/run" --set train.steps=1 \
    --set ckpt.interval=1 --set train.eval_interval=0 --set train.threads=1 >/dev/null 2>&1
  "$build/fluxtrain" ckpt reshard "$seed/run/checkpoints/step_00000001" "$seed/dp2pp2" --dp 2 --pp 2 --zero 1 >/dev/null
  "$build/fluxtrain" generate --ckpt "$seed/run" --tokens "1 2 3" --logits-out "$seed/small.safetensors"
fi
mkdir -p "$work/corpus_ckpt_manifest" "$work/corpus_safetensors"
cp "$seed/run/checkpoints/step_00000001/manifest.json" "$work/corpus_ckpt_manifest/single.json"
cp "$seed/dp2pp2/manifest.json" "$work/corpus_ckpt_manifest/dp2pp2.json"
cp "$seed/small.safetensors" "$work/corpus_safetensors/"
for t in ckpt_manifest safetensors; do fuzz_run $t 200000; done
echo "run_ckpt_fuzz: no crashes"

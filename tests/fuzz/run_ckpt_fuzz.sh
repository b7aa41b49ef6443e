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
mkdir -p "$work"
CXX="${FT_FUZZ_CXX:-clang++}"
command -v "$CXX" >/dev/null || { echo "run_ckpt_fuzz: $CXX not found (scripts/install-deps.sh installs clang)" >&2; exit 1; }
srcs=("$root/src/ckpt/ckpt_manifest.cpp" "$root/src/ckpt/pieces.cpp" "$root/src/ckpt/crypto.cpp"
      "$root/src/util/safetensors.cpp" "$root/src/util/checksum.cpp" "$root/src/tensor/tensor.cpp"
      "$root/src/tensor/memory.cpp" "$root/src/tensor/dtype.cpp" "$root/src/tensor/f16_convert.cpp"
      "$root/src/tensor/backend.cpp" "$root/src/tensor/host_threads.cpp"
      "$root/src/util/error.cpp" "$root/src/util/fs.cpp"
      "$root/src/util/log.cpp" "$root/src/util/strings.cpp")
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -I"$root/src" -I"$build/generated" $(pkg-config --cflags fmt))
libs=($(pkg-config --libs fmt libxxhash libcrypto) -ldl)
objs=()
for src in "${srcs[@]}"; do
  obj="$work/$(basename "$(dirname "$src")")_$(basename "$src" .cpp).o"
  newest=$(ls -t "$src" "$root"/src/ckpt/*.h "$root"/src/util/*.h "$root"/src/tensor/*.h | head -1)
  if [ ! -f "$obj" ] || [ "$newest" -nt "$obj" ]; then
    echo "run_ckpt_fuzz: compiling $(basename "$src")"
    "$CXX" "${flags[@]}" -fsanitize=fuzzer-no-link -c "$src" -o "$obj"
  fi
  objs+=("$obj")
done
for t in ckpt_manifest safetensors; do
  bin="$work/fuzz_$t"
  newest=$(ls -t "$root/tests/fuzz/fuzz_$t.cpp" "${objs[@]}" | head -1)
  if [ ! -x "$bin" ] || [ "$newest" -nt "$bin" ]; then
    echo "run_ckpt_fuzz: building $bin"
    "$CXX" "${flags[@]}" "$root/tests/fuzz/fuzz_$t.cpp" "${objs[@]}" -o "$bin" "${libs[@]}"
  fi
done

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
# FT_FUZZ_RUNS=N: N executions each (make fuzz) instead of SECONDS.
if [ -n "${FT_FUZZ_RUNS:-}" ]; then limit=(-runs="$FT_FUZZ_RUNS"); what="$FT_FUZZ_RUNS runs"
else limit=(-max_total_time="$seconds"); what="${seconds}s"; fi
for t in ckpt_manifest safetensors; do
  echo "run_ckpt_fuzz: fuzz_$t for $what"
  (cd "$work" && ASAN_OPTIONS=detect_leaks=1 "./fuzz_$t" "${limit[@]}" -max_len=200000 \
     -print_final_stats=1 "corpus_$t" 2>&1 | tail -n 14)
  status=${PIPESTATUS[0]}
  if [ "$status" -ne 0 ]; then
    echo "run_ckpt_fuzz: fuzz_$t failed (exit $status); crashing input left in $work" >&2
    exit 1
  fi
done
echo "run_ckpt_fuzz: no crashes"

#!/usr/bin/env bash
# Builds the libFuzzer targets for the shard and manifest readers with clang (ASan + UBSan) and
# runs each for a few seconds, seeded with a real dataset made by `fluxtrain prepare`.
#
#   tests/fuzz/run_fuzz.sh BUILD_DIR [SECONDS]      # CTest: data_fuzz
#
# Any crash, sanitizer report or trap fails the run; libFuzzer leaves the input in the work dir.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "$1" && pwd)"
seconds="${2:-10}"
work="$build/fuzz"
mkdir -p "$work"
CXX="${FT_FUZZ_CXX:-clang++}"
if ! command -v "$CXX" >/dev/null; then
  echo "run_fuzz: $CXX not found (scripts/install-deps.sh installs clang)" >&2
  exit 1
fi
srcs=("$root/src/data/shard.cpp" "$root/src/util/checksum.cpp" "$root/src/data/dataset_manifest.cpp"
      "$root/src/util/error.cpp" "$root/src/util/fs.cpp" "$root/src/util/strings.cpp")
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -I"$root/src" $(pkg-config --cflags fmt))
# Each source is compiled once into an object (cached while unchanged), then linked per target.
objs=()
for src in "${srcs[@]}"; do
  obj="$work/$(basename "$(dirname "$src")")_$(basename "$src" .cpp).o"
  newest=$(ls -t "$src" "$root"/src/data/*.h "$root"/src/util/*.h | head -1)
  if [ ! -f "$obj" ] || [ "$newest" -nt "$obj" ]; then
    echo "run_fuzz: compiling $(basename "$src")"
    "$CXX" "${flags[@]}" -fsanitize=fuzzer-no-link -c "$src" -o "$obj"
  fi
  objs+=("$obj")
done
for t in shard manifest; do
  bin="$work/fuzz_$t"
  newest=$(ls -t "$root/tests/fuzz/fuzz_$t.cpp" "${objs[@]}" | head -1)
  if [ ! -x "$bin" ] || [ "$newest" -nt "$bin" ]; then
    echo "run_fuzz: building $bin"
    "$CXX" "${flags[@]}" "$root/tests/fuzz/fuzz_$t.cpp" "${objs[@]}" -o "$bin" $(pkg-config --libs fmt)
  fi
done

# Seeds: a real dataset (two shards of each width would need a >65536 vocabulary; one suffices).
seed_ds="$work/seed_dataset"
if [ ! -f "$seed_ds/manifest.json" ]; then
  rm -rf "$seed_ds"
  "$build/fluxtrain" prepare --input "$root/tests/data/bilingual.txt" --out "$seed_ds" --shards 1 \
    --vocab-size 400 --val-fraction 0 >/dev/null
fi
for t in shard manifest; do
  corpus="$work/corpus_$t"
  mkdir -p "$corpus"
done
cp "$seed_ds"/*.ftshard "$work/corpus_shard/"
cp "$seed_ds/manifest.json" "$work/corpus_manifest/"
# FT_FUZZ_RUNS=N: N executions each (make fuzz) instead of SECONDS.
if [ -n "${FT_FUZZ_RUNS:-}" ]; then limit=(-runs="$FT_FUZZ_RUNS"); what="$FT_FUZZ_RUNS runs"
else limit=(-max_total_time="$seconds"); what="${seconds}s"; fi
for t in shard manifest; do
  echo "run_fuzz: fuzz_$t for $what"
  (cd "$work" && ASAN_OPTIONS=detect_leaks=1 "./fuzz_$t" "${limit[@]}" -max_len=65536 \
     -print_final_stats=1 "corpus_$t" 2>&1 | tail -n 14)
  status=${PIPESTATUS[0]}
  if [ "$status" -ne 0 ]; then
    echo "run_fuzz: fuzz_$t failed (exit $status); crashing input left in $work" >&2
    exit 1
  fi
done
echo "run_fuzz: no crashes"

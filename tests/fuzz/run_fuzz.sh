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
me=run_fuzz
. "$root/tests/fuzz/fuzz_lib.sh"
objs=()
fuzz_objects "$root/src/data/shard.cpp" "$root/src/util/checksum.cpp" "$root/src/data/dataset_manifest.cpp" \
             "$root/src/util/error.cpp" "$root/src/util/fs.cpp" "$root/src/util/strings.cpp"
for t in shard manifest; do fuzz_target $t "${objs[@]}" -- $(pkg-config --libs fmt); done

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
for t in shard manifest; do fuzz_run $t 65536; done
echo "run_fuzz: no crashes"

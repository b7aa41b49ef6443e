#!/usr/bin/env bash
# Builds the libFuzzer targets for what the command line hands to pure code — `data pull`'s URL and
# listed keys (fuzz_pull.cpp), data.mixture and its quotas (fuzz_mixture.cpp), `plan`'s options as
# the job and layout they make (fuzz_plan.cpp) — with clang (ASan + UBSan), and runs each. The
# same mechanism as run_fuzz.sh.
#
#   tests/fuzz/run_cli_fuzz.sh BUILD_DIR [SECONDS]              # CTest: cli_fuzz
#   FT_FUZZ_RUNS=1000000 tests/fuzz/run_cli_fuzz.sh BUILD_DIR   # a number of executions instead
#   FT_FUZZ_TARGETS="pull mixture" tests/fuzz/run_cli_fuzz.sh BUILD_DIR   # some of them
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "$1" && pwd)"
seconds="${2:-10}"
work="$build/fuzz_cli"
mkdir -p "$work"
CXX="${FT_FUZZ_CXX:-clang++}"
command -v "$CXX" >/dev/null || { echo "run_cli_fuzz: $CXX not found (scripts/install-deps.sh installs clang)" >&2; exit 1; }
targets=(${FT_FUZZ_TARGETS:-pull mixture plan})
# The sources each target links (listed by hand: a new dependency of this code goes here).
common=("$root"/src/util/error.cpp "$root"/src/util/strings.cpp)
srcs_pull=("$root"/src/data/objstore/object_url.cpp)
srcs_mixture=("$root"/src/data/loader/mixture.cpp "$root"/src/data/loader/sequence_plan.cpp)
# The planner's cost model (ft_plan, its catalog) and the model sizes and parallel config it reads.
srcs_plan=("$root"/src/plan/plan.cpp "$root"/src/plan/job.cpp "$root"/src/plan/memory_estimate.cpp
           "$root"/src/plan/time.cpp "$root"/src/plan/traffic.cpp "$root"/src/plan/roofline.cpp
           "$root"/src/plan/catalog.cpp "$root"/src/plan/gpu_peak.cpp "$root"/src/plan/moe.cpp "$root"/src/plan/goodput.cpp
           "$root"/src/plan/profile.cpp "$root"/src/plan/context_parallel.cpp
           "$root"/src/model/model_config.cpp
           "$root"/src/model/layout_sizes.cpp "$root"/src/model/activation_sizes.cpp
           "$root"/src/model/param_layout.cpp "$root"/src/parallel/parallel_config.cpp
           "$root"/src/parallel/micro_batches.cpp "$root"/src/parallel/wires.cpp "$root"/src/util/config_binder.cpp
           "$root"/src/util/log.cpp "$root"/src/util/fs.cpp "$root"/src/tensor/tensor.cpp "$root"/src/tensor/memory.cpp
           "$root"/src/tensor/dtype.cpp "$root"/src/tensor/f16_convert.cpp "$root"/src/tensor/device_runtime.cpp
           "$root"/src/tensor/backend.cpp "$root"/src/tensor/host_threads.cpp)
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -DTOML_HEADER_ONLY=0 -DTOML_SHARED_LIB=1 -I"$root/src" -I"$build/generated" $(pkg-config --cflags fmt))
libs=($(pkg-config --libs fmt) -ltomlplusplus -ldnnl -lxxhash -ldl)
# Each source is compiled once into an object (cached while neither it nor a header is newer).
compile() {
  local src=$1 rel obj newest
  rel=${src#"$root/src/"}
  obj="$work/${rel//\//_}.o"
  newest=$(ls -t "$src" "$root"/src/*/*.h "$root"/src/data/*/*.h | head -1 || true)  # ls may get SIGPIPE
  if [ ! -f "$obj" ] || [ "$newest" -nt "$obj" ]; then
    echo "run_cli_fuzz: compiling $rel" >&2
    "$CXX" "${flags[@]}" -fsanitize=fuzzer-no-link -c "$src" -o "$obj" || exit 1
  fi
  echo "$obj"
}
for t in "${targets[@]}"; do
  declare -n srcs="srcs_$t"
  objs=()
  for src in "${common[@]}" "${srcs[@]}"; do objs+=("$(compile "$src")"); done
  bin="$work/fuzz_$t"
  newest=$(ls -t "$root/tests/fuzz/fuzz_$t.cpp" "${objs[@]}" | head -1 || true)
  if [ ! -x "$bin" ] || [ "$newest" -nt "$bin" ]; then
    echo "run_cli_fuzz: building $bin"
    "$CXX" "${flags[@]}" "$root/tests/fuzz/fuzz_$t.cpp" "${objs[@]}" -o "$bin" "${libs[@]}"
  fi
done
# Seeds: the forms the docs and the tests use.
seed() { mkdir -p "$work/corpus_$1"; printf "$3" >"$work/corpus_$1/$2"; }
seed pull dir 's3://corpus/ds1\nds1/manifest.json\nds1/train-00000.ftshard\nds1_flip/notes.txt\nds1/\n'
seed pull slash 'gs://b_x/a/b/\na/b/c/d.bin\na/b\na/b/../x\na/b/./y\n'
seed pull object 's3://b/ds1/manifest.json\nds1/manifest.json\n'
seed pull root 's3://b\nx/y\n/z\n'
seed mixture langs 'ru=0.5, en=0.5\ndata/manpages\n\x10\x27\0\0\0\0\0\0'
seed mixture dirs 'ds_man#en=0.5, ds_man#ru=0.5\n\n\xe8\x03\0\0\0\0\0\0'
seed mixture urls 's3://b/web=0.3, ./data/manpages#ru=0.7,gs://c/d#de=1e-3\n\n\x64\0\0\0\0\0\0\0'
seed plan small '\x01\x02\x00\x05\x00\x03\x00\x02\x00\x01\x00\x00\x00\x00\x00\x01\x00\x01\x00\x01\x01\x00'
seed mixture zero 'a/b=0, ./c=1e308, ./d=1e308\n\n\xff\xff\xff\xff\xff\0\0\0'
if [ -n "${FT_FUZZ_RUNS:-}" ]; then limit=(-runs="$FT_FUZZ_RUNS"); what="$FT_FUZZ_RUNS runs"
else limit=(-max_total_time="$seconds"); what="${seconds}s"; fi
for t in "${targets[@]}"; do
  echo "run_cli_fuzz: fuzz_$t for $what"
  set +e
  (cd "$work" && ASAN_OPTIONS=detect_leaks=1 "./fuzz_$t" "${limit[@]}" -max_len=4096 -timeout=10 \
     -rss_limit_mb=2048 -print_final_stats=1 "corpus_$t" 2>&1 | tail -n 14)
  status=${PIPESTATUS[0]}
  set -e
  if [ "$status" -ne 0 ]; then
    echo "run_cli_fuzz: fuzz_$t failed (exit $status); crashing input left in $work" >&2
    exit 1
  fi
done
echo "run_cli_fuzz: no crashes"

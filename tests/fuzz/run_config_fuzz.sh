#!/usr/bin/env bash
# Builds the libFuzzer target for the config layer (TOML file + --set overrides, every section's
# validation; tests/fuzz/fuzz_config.cpp) with clang (ASan + UBSan) and runs it, seeded with the
# project's configs. The same mechanism as run_fuzz.sh.
#
#   tests/fuzz/run_config_fuzz.sh BUILD_DIR [SECONDS]      # CTest: config_fuzz
#   FT_FUZZ_RUNS=1000000 tests/fuzz/run_config_fuzz.sh BUILD_DIR   # a number of executions instead
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "$1" && pwd)"
seconds="${2:-10}"
work="$build/fuzz_config"
mkdir -p "$work"
CXX="${FT_FUZZ_CXX:-clang++}"
command -v "$CXX" >/dev/null || { echo "run_config_fuzz: $CXX not found (scripts/install-deps.sh installs clang)" >&2; exit 1; }
# The config layer and what its validation calls (model shapes, micro-batches, pipeline plans,
# the keys' effects, train.precision = "auto").
srcs=("$root"/src/config/config.cpp "$root"/src/util/config_binder.cpp "$root"/src/util/error.cpp
      "$root"/src/util/strings.cpp "$root"/src/util/fs.cpp "$root"/src/util/log.cpp
      "$root"/src/model/model_config.cpp "$root"/src/model/param_layout.cpp "$root"/src/tensor/tensor.cpp
      "$root"/src/tensor/memory.cpp "$root"/src/tensor/dtype.cpp
      "$root"/src/train/train_config.cpp "$root"/src/train/micro_batches.cpp "$root"/src/data/data_config.cpp
      "$root"/src/dist/parallel_config.cpp "$root"/src/dist/pipeline/pipeline_plan.cpp
      "$root"/src/dist/pipeline/partition.cpp "$root"/src/dist/pipeline/schedule.cpp
      "$root"/src/dist/pipeline/schedule_sim.cpp "$root"/src/obs/metrics_config.cpp
      "$root"/src/fault/fault_config.cpp "$root"/src/ckpt/ckpt_config.cpp
      "$root"/src/config/key_effects.cpp "$root"/src/data/manifest.cpp "$root"/src/data/checksum.cpp
      "$root"/src/kernels/cpu/native_precision.cpp "$root"/src/util/cpu_info.cpp)
# toml++ header-only, so that its parser is instrumented (and fuzzed) with the rest; its internal
# assertions off, as in the release library Debian ships (3.x asserts on input such as "[*a]",
# which the release build reports as a parse error).
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -DTOML_HEADER_ONLY=1 '-DTOML_ASSERT(expr)=static_assert(true)' -I"$root/src" $(pkg-config --cflags fmt))
libs=($(pkg-config --libs fmt) -ldnnl -lxxhash)
objs=()
for src in "${srcs[@]}"; do
  [ -f "$src" ] || continue
  rel=${src#"$root/src/"}
  obj="$work/${rel//\//_}.o"
  newest=$(ls -t "$src" "$root"/src/*/*.h "$root"/src/dist/pipeline/*.h "$root"/src/kernels/cpu/*.h | head -1 || true)  # ls may get SIGPIPE
  if [ ! -f "$obj" ] || [ "$newest" -nt "$obj" ]; then
    echo "run_config_fuzz: compiling $rel"
    if [ "$rel" = util/cpu_info.cpp ]; then
      # clang does not know every __builtin_cpu_supports name gcc does (f16c, amx-bf16): the
      # CPU probe is compiled by the project's compiler, uninstrumented (it reads no input).
      g++ -std=c++20 -O1 -g -I"$root/src" $(pkg-config --cflags fmt) -c "$src" -o "$obj" || exit 1
    else
      "$CXX" "${flags[@]}" -fsanitize=fuzzer-no-link -c "$src" -o "$obj" || exit 1
    fi
  fi
  objs+=("$obj")
done
bin="$work/fuzz_config"
newest=$(ls -t "$root/tests/fuzz/fuzz_config.cpp" "${objs[@]}" | head -1 || true)
if [ ! -x "$bin" ] || [ "$newest" -nt "$bin" ]; then
  echo "run_config_fuzz: building $bin"
  "$CXX" "${flags[@]}" "$root/tests/fuzz/fuzz_config.cpp" "${objs[@]}" -o "$bin" "${libs[@]}"
fi
# Seeds: every config of the project, and one with --set overrides after the NUL.
corpus="$work/corpus_config"
mkdir -p "$corpus"
cp "$root"/configs/*.toml "$corpus/"
printf '[model]\npreset = "tiny"\n\0train.steps=3\nparallel.dp=2\nparallel.pp=2\nparallel.pp_schedule="1f1b"\noptim.lr=1e-3\n' \
  >"$corpus/with-sets"
if [ -n "${FT_FUZZ_RUNS:-}" ]; then limit=(-runs="$FT_FUZZ_RUNS"); what="$FT_FUZZ_RUNS runs"
else limit=(-max_total_time="$seconds"); what="${seconds}s"; fi
echo "run_config_fuzz: fuzz_config for $what"
set +e
(cd "$work" && ASAN_OPTIONS=detect_leaks=1 "./fuzz_config" "${limit[@]}" -max_len=8192 -timeout=10 \
   -rss_limit_mb=2048 -print_final_stats=1 "$corpus" 2>&1 | tail -n 14)
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
  echo "run_config_fuzz: fuzz_config failed (exit $status); crashing input left in $work" >&2
  exit 1
fi
echo "run_config_fuzz: no crashes"

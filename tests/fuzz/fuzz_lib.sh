# What every tests/fuzz/run_*fuzz.sh script shares (sourced, after it sets `me`, `root`, `build`):
# the clang (ASan + UBSan + libFuzzer) flags, one cache of compiled objects for all of a build
# dir's fuzzers, linking a target and running it.
#
#   fuzz_objects SRC... [-- FLAG...]   appends to `objs` each SRC's object, compiled with
#                                  FUZZ_FLAGS and the FLAGs
#   fuzz_target NAME OBJ... -- LIB...   links tests/fuzz/fuzz_NAME.cpp into $work/fuzz_NAME
#   fuzz_run NAME MAX_LEN [LIBFUZZER ARG...]   runs it on $work/corpus_NAME for $seconds
#                                  (FT_FUZZ_RUNS=N: N executions instead)
#
# Objects live in $build/fuzz_objs, named by source (and by the extra FLAGs, when given), so a
# source two fuzzers link is compiled once, and again only when a file it was compiled from
# changed; ctest runs the scripts side by side, so a compile holds a lock on its object and
# writes it under a temporary name first.
CXX="${FT_FUZZ_CXX:-clang++}"
command -v "$CXX" >/dev/null || { echo "$me: $CXX not found (scripts/install-deps.sh installs clang)" >&2; exit 1; }
FUZZ_FLAGS=(-std=c++20 -O1 -gline-tables-only -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
            -I"$root/src" -I"$build/generated" $(pkg-config --cflags fmt))
# The compiled toml++ library (Debian's) for the sources that include it (config.cpp, catalog.cpp).
FUZZ_TOML_LIB=(-DTOML_HEADER_ONLY=0 -DTOML_SHARED_LIB=1)
fuzz_objs="$build/fuzz_objs"
mkdir -p "$fuzz_objs" "$work"

# An object is stale when it or its dependency list is missing, or when a file of the project the
# compiler read for it (its source and headers: the -MMD list) is newer.
fuzz_stale() {
  local obj=$1 deps
  [ -f "$obj" ] && [ -f "$obj.d" ] || return 0
  mapfile -t deps < <(sed 's/\\$//' "$obj.d" | tr ' ' '\n' | grep "^$root/" | grep -v ':$')
  [ ${#deps[@]} -gt 0 ] || return 0
  [ -n "$(find "${deps[@]}" -newer "$obj" -print -quit 2>/dev/null)" ] || [ "$(find "${deps[@]}" 2>/dev/null | wc -l)" -ne ${#deps[@]} ]
}

fuzz_objects() {
  local fz_srcs=() src rel obj tag=""
  while [ $# -gt 0 ] && [ "$1" != -- ]; do fz_srcs+=("$1"); shift; done
  [ $# -eq 0 ] || shift
  [ $# -eq 0 ] || tag="_$(printf '%s ' "$@" | md5sum | cut -c1-8)"
  for src in "${fz_srcs[@]}"; do
    rel=${src#"$root/"}
    obj="$fuzz_objs/${rel//\//_}$tag.o"
    (
      flock 9
      if fuzz_stale "$obj"; then
        echo "$me: compiling $rel"
        "$CXX" "${FUZZ_FLAGS[@]}" "$@" -fsanitize=fuzzer-no-link -MMD -MF "$obj.d" -c "$src" -o "$obj.tmp" &&
          mv "$obj.tmp" "$obj"
      fi
    ) 9>"$obj.lock" || exit 1
    objs+=("$obj")
  done
}

fuzz_target() {
  local name=$1 objs=() newest bin="$work/fuzz_$1"
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do objs+=("$1"); shift; done
  [ $# -eq 0 ] || shift
  newest=$(ls -t "$root/tests/fuzz/fuzz_$name.cpp" "${objs[@]}" | head -1 || true)  # ls may get SIGPIPE
  if [ ! -x "$bin" ] || [ "$newest" -nt "$bin" ]; then
    echo "$me: building $bin"
    "$CXX" "${FUZZ_FLAGS[@]}" "$root/tests/fuzz/fuzz_$name.cpp" "${objs[@]}" -o "$bin" "$@" || exit 1
  fi
}

fuzz_run() {
  local name=$1 max_len=$2 limit what status
  shift 2
  if [ -n "${FT_FUZZ_RUNS:-}" ]; then limit=(-runs="$FT_FUZZ_RUNS"); what="$FT_FUZZ_RUNS runs"
  else limit=(-max_total_time="$seconds"); what="${seconds}s"; fi
  echo "$me: fuzz_$name for $what"
  set +e
  (cd "$work" && ASAN_OPTIONS=detect_leaks=1 "./fuzz_$name" "${limit[@]}" -max_len="$max_len" "$@" \
     -print_final_stats=1 "corpus_$name" 2>&1 | tail -n 14)
  status=${PIPESTATUS[0]}
  set -e
  if [ "$status" -ne 0 ]; then
    echo "$me: fuzz_$name failed (exit $status); crashing input left in $work" >&2
    exit 1
  fi
}

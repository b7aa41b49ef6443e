#!/usr/bin/env bash
# Issue 14, "nothing lost, nothing leaked": every case found by trying to break the command line,
# as a regression test. Each case is a function; all run (each in its own subshell and
# directory), and the summary names the ones that failed.
#
#   FLUXTRAIN=build/fluxtrain tests/e2e/bad_input_test.sh                 # every case
#   FLUXTRAIN=build/fluxtrain tests/e2e/bad_input_test.sh force_input     # some cases
#
# The cases that need a real cgroup, signals or two ranks are here too; the longer signal
# scenarios (2 ranks under the supervisor, a signal during an asynchronous checkpoint write) are
# tests/fault/preempt_test.py.
source "$(dirname "$0")/lib.sh"
set +e
FT=$(readlink -f "$FT")
cfg=$ROOT/configs/tiny.toml
export OMP_NUM_THREADS=1
quick=(--set train.eval_interval=0 --set train.threads=1 --set metrics.port=0)

# expect_exit CODE "substring" cmd...: the command exits with CODE, its stderr has an "error:"
# line containing the substring (one error line: the first one must say it) and a "hint:".
expect_exit() {
  local code=$1 want=$2; shift 2
  local out rc=0
  out=$("$@" 2>&1 >/dev/null) || rc=$?
  [ "$rc" -eq "$code" ] || fail "expected exit $code, got $rc from: $*; stderr: $(tail -n 5 <<<"$out")"
  local line
  line=$(grep -m1 '^\(\[.*\] \)\?error: ' <<<"$out")
  [ -n "$line" ] || fail "no 'error:' line from: $*; stderr: $(tail -n 5 <<<"$out")"
  grep -qF -- "$want" <<<"$line" || fail "expected '$want' in the first error line: $line"
  grep -q 'hint: ' <<<"$out" || fail "no 'hint:' line from: $*"
  echo "  ok: $line"
}
# train_tiny RUN_DIR [args...]: a short tiny run that must succeed.
train_tiny() {
  local dir=$1; shift
  "$FT" train --config "$cfg" --run-dir "$dir" "${quick[@]}" "$@" >"$dir.log" 2>&1 ||
    fail "training into $dir failed: $(tail -n 5 "$dir.log")"
}

# ---- 6: a directory as --config is refused, naming it ---------------------------------------------
case_config_directory() {
  mkdir -p "$WORK/cfgdir"
  for cmd in train config plan; do
    expect_exit 2 "config file $WORK/cfgdir is a directory, not a TOML file" "$FT" $cmd --config "$WORK/cfgdir"
  done
  [ ! -e "$WORK/cfgdir/config.json" ] && [ ! -e runs ] || fail "a run started from a directory config"
}

# ---- 3: non-finite values are refused for every float key ------------------------------------------
case_nonfinite_keys() {
  expect_exit 2 "--set: optim.lr = inf is not valid: expected a finite number" \
    "$FT" train --config "$cfg" --run-dir "$WORK/r" --set optim.lr=inf
  expect_exit 2 "--set: optim.lr = nan is not valid: expected a finite number" \
    "$FT" train --config "$cfg" --run-dir "$WORK/r" --set optim.lr=nan
  expect_exit 2 "--set: model.norm_eps = -inf is not valid: expected a finite number" \
    "$FT" config --config "$cfg" --set model.norm_eps=-inf
  printf '[optim]\nlr = inf\n' >"$WORK/inf.toml"
  expect_exit 2 "$WORK/inf.toml: optim.lr = inf is not valid: expected a finite number" "$FT" config --config "$WORK/inf.toml"
  [ ! -e "$WORK/r" ] || fail "a run with a non-finite setting wrote $WORK/r"
}

# ---- 8: command-line parse errors, zero counts ---------------------------------------------------
case_cli_parse_errors() {
  expect_exit 2 "fluxtrain train: The following argument was not expected: --stepz" \
    "$FT" train --config "$cfg" --stepz
  expect_exit 2 "fluxtrain train: --config is required" "$FT" train
  expect_exit 2 "fluxtrain ckpt: A subcommand is required" "$FT" ckpt
  expect_exit 2 "--nproc: 0 is not valid: expected an integer >= 1" "$FT" train --config "$cfg" --nproc 0
  expect_exit 2 "--nproc: 0 is not valid: expected an integer >= 1" "$FT" launch --config "$cfg" --nproc 0
  expect_exit 2 "--nodes: 0 is not valid: expected an integer >= 1" "$FT" plan --model tiny --gpu a100-80gb --nodes 0
  expect_exit 2 "--seq-len: 0 is not valid: expected an integer >= 1" "$FT" plan --model tiny --gpu a100-80gb --seq-len 0
  expect_exit 2 "--max-tokens: -5 is not valid: expected an integer >= 1" \
    "$FT" generate --ckpt "$WORK" --tokens "1 2" --max-tokens -5
}

# ---- 8: an allocation that fails is reported in words, not as "std::bad_alloc" ----------------------
case_out_of_memory_words() {
  expect_exit 2 "fluxtrain schedule: out of memory (an allocation failed)" \
    bash -c "ulimit -v 300000; exec '$FT' schedule --pp 64 --micro-batches 100000000"
}

# ---- the runner ------------------------------------------------------------------------------------
cases=("$@")
if [ ${#cases[@]} -eq 0 ]; then
  mapfile -t cases < <(declare -F | awk '{print $3}' | grep '^case_' | sed 's/^case_//')
fi
failed=()
for c in "${cases[@]}"; do
  echo "== $c"
  mkdir -p "$WORK/$c"
  if ! (cd "$WORK/$c" && WORK="$WORK/$c" "case_$c"); then failed+=("$c"); fi
done
echo "${#cases[@]} case(s), ${#failed[@]} failed${failed[*]:+: ${failed[*]}}"
[ ${#failed[@]} -eq 0 ]

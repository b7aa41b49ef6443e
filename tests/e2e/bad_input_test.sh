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

# ---- 1: --force replaces a dataset and nothing else; an output never overlaps an input -----------
text=$ROOT/tests/data/bilingual.txt
prep=(--vocab-size 400 --shards 1 --val-fraction 0)
case_force_input() {
  mkdir -p x/c && cp "$text" x/c/a.txt
  expect_exit 2 "--out x/c is also an input" "$FT" prepare --input x/c --out x/c "${prep[@]}" --force
  expect_exit 2 "--out x contains the input x/c" "$FT" prepare --input x/c --out x "${prep[@]}" --force
  expect_exit 2 "--out x/c/ds is inside the input x/c" "$FT" prepare --input x/c --out x/c/ds "${prep[@]}"
  expect_exit 2 "--out x/c is inside the input x/*" "$FT" prepare --input 'x/*' --out x/c "${prep[@]}" --force
  [ -f x/c/a.txt ] && [ ! -e x/c/ds ] || fail "the input x/c/a.txt was touched"
  mkdir -p other && echo "keep me" >other/notes.md
  expect_exit 2 "--out other already exists and is not a dataset: --force only replaces a dataset" \
    "$FT" prepare --input x/c --out other "${prep[@]}" --force
  echo "keep me" >file.bin
  expect_exit 2 "--out file.bin already exists and is not a dataset" "$FT" prepare --input x/c --out file.bin "${prep[@]}" --force
  grep -q "keep me" other/notes.md && grep -q "keep me" file.bin || fail "--force destroyed what is not a dataset"
  # A dataset: refused without --force, replaced with it.
  "$FT" prepare --input x/c --out ds "${prep[@]}" >/dev/null 2>&1 || fail "prepare into ds failed"
  expect_exit 2 "--out ds already holds a dataset" "$FT" prepare --input x/c --out ds "${prep[@]}"
  "$FT" prepare --input x/c --out ds "${prep[@]}" --force >/dev/null 2>&1 || fail "prepare --force over a dataset failed"
  # A checkpoint has a manifest.json too, but is no dataset.
  train_tiny "$WORK/run" --set train.steps=1 --set ckpt.interval=1
  expect_exit 2 "already exists and is not a dataset: --force only replaces a dataset" \
    "$FT" prepare --input x/c --out run/checkpoints/step_00000001 "${prep[@]}" --force
  # The same rule for the tokenizer.
  "$FT" tokenizer train --input x/c --vocab-size 400 --out tok.model >/dev/null 2>&1 || fail "tokenizer train failed"
  expect_exit 2 "--out tok.model already holds a tokenizer model" "$FT" tokenizer train --input x/c --vocab-size 400 --out tok.model
  "$FT" tokenizer train --input x/c --vocab-size 400 --out tok.model --force >/dev/null 2>&1 || fail "tokenizer --force failed"
  expect_exit 2 "--out file.bin already exists and is not a tokenizer model" \
    "$FT" tokenizer train --input x/c --vocab-size 400 --out file.bin --force
  expect_exit 2 "--out x/c/a.txt is also an input" "$FT" tokenizer train --input x/c/a.txt --vocab-size 400 --out x/c/a.txt --force
  grep -q "keep me" file.bin && cmp -s x/c/a.txt "$text" || fail "tokenizer train --force destroyed a file"
  # Checkpoint conversions never write into their source.
  expect_exit 2 "OUT run/checkpoints/step_00000001/hf is inside the input" \
    "$FT" ckpt export-hf run/checkpoints/step_00000001 run/checkpoints/step_00000001/hf
}

# ---- 8: prepare --out at a mount point is refused before the work, not at the final rename ---------
case_prepare_mount_point() {
  mkdir -p mnt
  if ! unshare -m bash -c "mount -t tmpfs -o size=16m none '$WORK/mnt'" 2>/dev/null; then
    echo "  skipped: this machine does not let the test mount a tmpfs in a private mount namespace"
    return 0
  fi
  expect_exit 2 "--out $WORK/mnt is a mount point" \
    unshare -m bash -c "mount -t tmpfs -o size=16m none '$WORK/mnt' && exec '$FT' prepare --input '$text' --out '$WORK/mnt' ${prep[*]}"
}

# ---- 8: binary files named .txt are skipped, each named -------------------------------------------
case_binary_txt() {
  mkdir -p in && cp "$text" in/a.txt && head -c 300000 "$FT" >in/program.txt
  local out
  out=$("$FT" prepare --input in --out ds "${prep[@]}" 2>&1) || fail "prepare failed: $(tail -n 3 <<<"$out")"
  grep -q "skipping $WORK/in/program.txt: .* bytes are invalid UTF-8 or NUL: not text" <<<"$out" ||
    grep -q "skipping in/program.txt: .* bytes are invalid UTF-8 or NUL: not text" <<<"$out" ||
    fail "the binary file was not named as skipped: $(grep -i 'skip\|invalid' <<<"$out")"
  grep -q "1 binary files skipped" <<<"$out" || fail "the report does not count it"
  echo "  ok: $(grep -m1 'skipping .*program.txt' <<<"$out")"
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

#!/usr/bin/env bash
# The data subcommands as a user runs them: tokenizer train/encode/decode, prepare, data verify
# (also of a corrupted dataset), and their errors.
#
#   tests/data/cli.sh build/fluxtrain
set -uo pipefail
bin="$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d /tmp/ft_cli_XXXXXX)"
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
check() {  # check NAME CONDITION-COMMAND...
  local name="$1"; shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $name"; fi
}

"$bin" tokenizer train --input "$root/tests/data/bilingual.txt" --vocab-size 400 --out "$work/tok.model" >"$work/train.out" 2>&1
check "tokenizer train writes a model" test -s "$work/tok.model"
text='Процесс открывает файл: open(2) returns a descriptor 🙂'
ids=$(printf '%s\n' "$text" | "$bin" tokenizer encode --model "$work/tok.model")
check "encode prints ids" grep -Eq '^[0-9]+( [0-9]+)+$' <<<"$ids"
back=$(printf '%s\n' "$ids" | "$bin" tokenizer decode --model "$work/tok.model")
check "decode(encode(text)) == text" test "$back" = "$text"
out=$(echo "12 x 7" | "$bin" tokenizer decode --model "$work/tok.model" 2>&1); rc=$?
check "decode rejects a non-number (exit 2)" test $rc -eq 2
check "decode names the bad token" grep -q 'stdin:1: "x" is not a token id' <<<"$out"

mkdir -p "$work/in"
split -l 5 "$root/tests/data/bilingual.txt" "$work/in/part-" && for f in "$work"/in/part-*; do mv "$f" "$f.txt"; done
"$bin" prepare --input "$work/in" --out "$work/ds" --shards 2 --vocab-size 400 --val-fraction 0 >"$work/prep.out" 2>&1
check "prepare prints languages" grep -q ' ru ' "$work/prep.out"
"$bin" data verify "$work/ds" >"$work/verify.out" 2>&1
check "verify accepts a fresh dataset" grep -q 'OK$' "$work/verify.out"

printf '\x42' | dd of="$work/ds/train-00001.ftshard" bs=1 seek=70 conv=notrunc status=none
out=$("$bin" data verify "$work/ds" 2>&1); rc=$?
check "verify fails on a corrupted shard (exit 1)" test $rc -eq 1
check "verify names the corrupted shard" grep -q 'BAD .*train-00001.ftshard: checksum mismatch' <<<"$out"

out=$("$bin" prepare --input "$work/none" --out "$work/ds2" 2>&1); rc=$?
check "missing input: exit 2" test $rc -eq 2
check "missing input: error and hint" grep -q 'error: input .*none: no such file or directory' <<<"$out"
check "missing input: no output dir" test ! -e "$work/ds2"
out=$("$bin" prepare --input "$root/tests/data" 2>&1); rc=$?
check "--out is required" test $rc -ne 0
out=$("$bin" data verify "$work" 2>&1); rc=$?
check "verify of a non-dataset says so" grep -q 'not a fluxtrain dataset' <<<"$out"

echo "$passed passed, $failed failed"
test $failed -eq 0

#!/usr/bin/env bash
# `fluxtrain prepare` spread over ranks (--nproc N, i.e. mpirun) writes the same dataset, byte for
# byte, as one process, for N = 2 and 3 (a real RU+EN corpus from Debian's manual pages); a bad
# input under 2 ranks gives one error and leaves nothing behind.
#   usage: prepare_ranks_test.sh FLUXTRAIN
set -euo pipefail
FT="$1"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
IN=(--input "/usr/share/man/man1/[a-b]*.gz" --input "/usr/share/man/ru/man1/[a-f]*.gz")
for n in 1 2 3; do
  nproc=(); [ "$n" -gt 1 ] && nproc=(--nproc "$n")
  timeout 300 "$FT" prepare "${IN[@]}" --out "$WORK/ds$n" --shards 5 --val-fraction 0.1 --vocab-size 512 \
    "${nproc[@]}" > "$WORK/log$n" 2>&1 || { cat "$WORK/log$n"; exit 1; }
  grep -q "$n rank(s)" "$WORK/log$n" || { echo "FAIL: the report of N=$n does not say $n rank(s)"; cat "$WORK/log$n"; exit 1; }
done
for n in 2 3; do
  if ! diff -r "$WORK/ds1" "$WORK/ds$n"; then echo "FAIL: N=$n differs from N=1"; exit 1; fi
done
echo "ok: N = 1, 2, 3 wrote identical datasets ($(ls "$WORK/ds1" | wc -l) files)"
if timeout 120 "$FT" prepare --input "$WORK/missing" --out "$WORK/bad" --nproc 2 > "$WORK/log-bad" 2>&1; then
  echo "FAIL: a missing input succeeded"; exit 1
fi
grep -q "error: .*missing" "$WORK/log-bad" || { echo "FAIL: no error naming the input"; cat "$WORK/log-bad"; exit 1; }
if ls "$WORK" | grep -q "^bad"; then echo "FAIL: a failed prepare left files: $(ls "$WORK")"; exit 1; fi
echo "ok: a bad input under 2 ranks: one error naming it, nothing left behind"
echo "2 passed, 0 failed"
